import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildAdminApp } from '../../src/admin-app.js';
import { remoteAdmin, type AdminTransport } from '../../src/cli/admin-client.js';
import type { Deps } from '../../src/deps.js';
import { afterAnnounced, basicAuth, FORM, form, PASSWORD, seedClient, seedUser, startTestApp, type TestApp } from '../helpers/app.js';
import { DEVICE_GRANT } from '../helpers/device.js';
import { signIn, userinfo } from '../helpers/tokens.js';

/**
 * Issue 19 §2: the admin API, over real HTTP on its own listeners (a loopback TCP port with the
 * token, and a Unix socket), never on the public port.
 */

const ADMIN_TOKEN = 'an-admin-token-of-at-least-32-characters-0123456789';
let t: TestApp;
let tcp: FastifyInstance;
let socketApp: FastifyInstance;
let admin: AdminTransport;
let overSocket: AdminTransport;
let socketPath: string;
const folder = mkdtempSync(path.join(tmpdir(), 'device-auth-admin-'));
const logLines: string[] = [];

/** The routes that change a client's row, which every instance hears of (an UPDATE or DELETE announcement). */
const CHANGES_A_CLIENT = /^\/admin\/clients\/[^/?]+(\/(disable|enable|rotate-secret))?$/;

/**
 * The admin API's answer, with the body as JSON; after a change to a client, once the public app
 * has heard of it (afterAnnounced).
 */
async function call(method: string, url: string, body?: unknown, via: AdminTransport = admin) {
  const send = () => via.send(method, url, body) as Promise<{ status: number; body: any }>;
  if (method === 'GET' || !CHANGES_A_CLIENT.test(url)) return send();
  return afterAnnounced(t, send, (answer) => answer.status < 300);
}

/** A raw request to the TCP listener, for what the CLI's client would never send. */
function raw(init: RequestInit & { path: string }) {
  const { path: at, ...rest } = init;
  return fetch(`http://127.0.0.1:${(tcp.server.address() as { port: number }).port}${at}`, rest);
}

/** Whether the client's secret opens the token endpoint (a bot's device code request). */
async function secretWorks(clientId: string, secret: string): Promise<boolean> {
  const res = await t.app.inject({
    method: 'POST',
    url: '/oauth/device/code',
    headers: { ...FORM, authorization: basicAuth(clientId, secret) },
    payload: form({ scope: 'openid' }),
  });
  if (res.statusCode !== 200 && res.statusCode !== 401) throw new Error(`unexpected ${res.statusCode}: ${res.body}`);
  return res.statusCode === 200;
}

beforeAll(async () => {
  t = await startTestApp({ env: { ADMIN_TOKEN } });
  const log = pino({ level: 'info' }, { write: (line: string) => logLines.push(line) });
  tcp = await buildAdminApp(t.deps, { listener: 'tcp', logger: log });
  await tcp.listen({ host: '127.0.0.1', port: 0 });
  admin = remoteAdmin({ url: `http://127.0.0.1:${(tcp.server.address() as { port: number }).port}` }, ADMIN_TOKEN);
  // A socket without ADMIN_TOKEN: its file mode is its only lock.
  const tokenless: Deps = { ...t.deps, config: { ...t.deps.config, admin: { ...t.deps.config.admin, token: undefined } } };
  socketApp = await buildAdminApp(tokenless, { listener: 'socket', logger: false });
  socketPath = path.join(folder, 'admin.sock');
  await socketApp.listen({ path: socketPath });
  overSocket = remoteAdmin({ socketPath }, undefined);
});

afterAll(async () => {
  await tcp?.close();
  await socketApp?.close();
  await t?.close();
  rmSync(folder, { recursive: true, force: true });
});

describe('who may use the admin API', () => {
  it('without the token, with a wrong one, or with a malformed header: 401 problem+json asking for Bearer, and nothing runs', async () => {
    for (const authorization of [undefined, 'Bearer wrong', `Bearer ${ADMIN_TOKEN}x`, `Basic ${ADMIN_TOKEN}`, `Bearer ${ADMIN_TOKEN.slice(0, -1)}`]) {
      const res = await raw({
        path: '/admin/users',
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(authorization && { authorization }) },
        body: JSON.stringify({ email: 'sneaky@example.test', password: PASSWORD }),
      });
      expect(res.status).toBe(401);
      expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      expect(res.headers.get('www-authenticate')).toContain('Bearer');
      expect(await res.json()).toMatchObject({ status: 401, type: 'urn:device-auth:problem:unauthorized' });
    }
    expect((await call('GET', '/admin/users/sneaky@example.test')).status).toBe(404);
  });

  it('every route in the OpenAPI document refuses a request without the token, before validating anything', async () => {
    const doc = (await call('GET', '/admin/openapi.json')).body as { paths: Record<string, Record<string, unknown>> };
    let checked = 0;
    for (const [template, operations] of Object.entries(doc.paths)) {
      const url = template.replace('{clientId}', 'tv_x').replace('{email}', 'a%40example.test').replace('{grantId}', '00000000-0000-4000-8000-000000000000');
      for (const method of Object.keys(operations)) {
        const res = await raw({
          path: url,
          method: method.toUpperCase(),
          headers: { 'content-type': 'application/json' },
          ...(method !== 'get' && { body: '{}' }),
        });
        expect(res.status, `${method} ${url}`).toBe(401);
        checked += 1;
      }
    }
    expect(checked).toBeGreaterThanOrEqual(21);
  });

  it('the TCP listener refuses to exist without ADMIN_TOKEN', async () => {
    const tokenless: Deps = { ...t.deps, config: { ...t.deps.config, admin: { ...t.deps.config.admin, token: undefined } } };
    await expect(buildAdminApp(tokenless, { listener: 'tcp', logger: false })).rejects.toThrow(/ADMIN_TOKEN/);
  });

  it('without ADMIN_TOKEN the Unix socket answers without one', async () => {
    expect((await call('GET', '/admin/clients?limit=1', undefined, overSocket)).status).toBe(200);
  });

  it('the public port has no admin route', async () => {
    for (const url of ['/admin/clients', '/admin/openapi.json']) {
      const res = await t.app.inject({ method: 'GET', url, headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
      expect(res.statusCode).toBe(404);
    }
  });
});

describe('clients', () => {
  it('create shows a confidential secret once; list pages in client_id order; show never has a secret', async () => {
    const created = await call('POST', '/admin/clients', { name: 'Kitchen Bot', kind: 'bot', type: 'confidential' });
    expect(created.status).toBe(201);
    expect(created.body.client_secret).toMatch(/^dacs_/);
    expect(await secretWorks(created.body.client_id, created.body.client_secret)).toBe(true);
    const shown = await call('GET', `/admin/clients/${created.body.client_id}`);
    expect(shown.body).toMatchObject({
      client_id: created.body.client_id,
      name: 'Kitchen Bot',
      scopes: ['openid', 'profile', 'email', 'offline_access'],
      disabled: false,
    });
    expect(JSON.stringify(shown.body)).not.toMatch(/secret|hash/);

    for (let i = 0; i < 3; i++) await call('POST', '/admin/clients', { name: `TV ${i}`, kind: 'tv', type: 'public', scopes: ['openid'] });
    const all: string[] = [];
    let after: string | null = null;
    for (let pages = 0; pages < 20; pages++) {
      const page = await call('GET', `/admin/clients?limit=2${after ? `&after=${after}` : ''}`);
      expect(page.status).toBe(200);
      expect(page.body.items.length).toBeLessThanOrEqual(2);
      all.push(...page.body.items.map((c: { client_id: string }) => c.client_id));
      after = page.body.next_after;
      if (after === null) break;
    }
    expect(all).toEqual([...all].sort());
    expect(new Set(all).size).toBe(all.length);
    expect(all).toContain(created.body.client_id);
  });

  it('update changes name and scopes at the next request; a device app cannot become a resource server; unknown fields are refused', async () => {
    const tv = await seedClient(t, { kind: 'tv' });
    const code = (scope: string) =>
      t.app.inject({ method: 'POST', url: '/oauth/device/code', headers: FORM, payload: form({ client_id: tv.clientId, scope }) });
    expect((await code('openid email')).statusCode).toBe(200);
    const changed = await call('PATCH', `/admin/clients/${tv.clientId}`, { name: 'Bedroom TV', scopes: ['openid'] });
    expect(changed.status).toBe(200);
    expect(changed.body).toMatchObject({ name: 'Bedroom TV', scopes: ['openid'] });
    const refused = await code('openid email');
    expect(refused.statusCode).toBe(400);
    expect(refused.json().error).toBe('invalid_scope');
    expect((await call('PATCH', `/admin/clients/${tv.clientId}`, { introspection: true })).status).toBe(409);
    const unknownField = await call('PATCH', `/admin/clients/${tv.clientId}`, { secret_hash: 'x' });
    expect(unknownField.status).toBe(400);
    expect((await call('PATCH', '/admin/clients/tv_nothing', { name: 'X' })).status).toBe(404);
  });

  it('disable refuses the app on the token endpoint at its next request; enable lets it back', async () => {
    const bot = await seedClient(t, { kind: 'bot', type: 'confidential' });
    expect(await secretWorks(bot.clientId, bot.clientSecret!)).toBe(true);
    expect((await call('POST', `/admin/clients/${bot.clientId}/disable`)).body).toEqual({ client_id: bot.clientId, disabled: true });
    expect(await secretWorks(bot.clientId, bot.clientSecret!)).toBe(false);
    expect((await call('POST', `/admin/clients/${bot.clientId}/enable`)).body).toEqual({ client_id: bot.clientId, disabled: false });
    expect(await secretWorks(bot.clientId, bot.clientSecret!)).toBe(true);
    expect((await call('POST', '/admin/clients/bot_nothing/disable')).status).toBe(404);
  });

  it('rotate-secret with a grace period: both secrets work until it ends, then only the new one', async () => {
    const bot = await seedClient(t, { kind: 'bot', type: 'confidential' });
    const rotated = await call('POST', `/admin/clients/${bot.clientId}/secret`, { grace_period_seconds: 600 });
    expect(rotated.status).toBe(200);
    expect(rotated.body.previous_secret_expires_at).toBe(new Date(t.clock.now().getTime() + 600_000).toISOString());
    expect(await secretWorks(bot.clientId, rotated.body.client_secret)).toBe(true);
    expect(await secretWorks(bot.clientId, bot.clientSecret!)).toBe(true);
    t.clock.advance(601);
    expect(await secretWorks(bot.clientId, bot.clientSecret!)).toBe(false);
    expect(await secretWorks(bot.clientId, rotated.body.client_secret)).toBe(true);
  });

  it("rotate-secret without a grace period stops the old secret at once; a second rotation ends the first one's overlap", async () => {
    const bot = await seedClient(t, { kind: 'bot', type: 'confidential' });
    const first = await call('POST', `/admin/clients/${bot.clientId}/secret`, { grace_period_seconds: 600 });
    const second = await call('POST', `/admin/clients/${bot.clientId}/secret`);
    expect(second.body.previous_secret_expires_at).toBeNull();
    expect(await secretWorks(bot.clientId, bot.clientSecret!)).toBe(false);
    expect(await secretWorks(bot.clientId, first.body.client_secret)).toBe(false);
    expect(await secretWorks(bot.clientId, second.body.client_secret)).toBe(true);
  });

  it('ten rotations at once leave exactly one working secret', async () => {
    const bot = await seedClient(t, { kind: 'bot', type: 'confidential' });
    const answers = await Promise.all(Array.from({ length: 10 }, () => call('POST', `/admin/clients/${bot.clientId}/secret`)));
    expect(answers.map((a) => a.status)).toEqual(Array(10).fill(200));
    const working = [];
    for (const answer of answers) if (await secretWorks(bot.clientId, answer.body.client_secret)) working.push(answer);
    expect(working).toHaveLength(1);
  });

  it('a public client has no secret to rotate (409); the grace period is bounded', async () => {
    const tv = await seedClient(t, { kind: 'tv' });
    const res = await call('POST', `/admin/clients/${tv.clientId}/secret`);
    expect(res.status).toBe(409);
    expect(res.body.type).toBe('urn:device-auth:problem:public-client');
    const bot = await seedClient(t, { kind: 'bot', type: 'confidential' });
    for (const grace of [-1, 7 * 86400 + 1, 1.5, '60']) {
      expect((await call('POST', `/admin/clients/${bot.clientId}/secret`, { grace_period_seconds: grace })).status).toBe(400);
    }
    expect(await secretWorks(bot.clientId, bot.clientSecret!)).toBe(true);
  });

  it('delete ends every token of the app at once and forgets it', async () => {
    const tv = await seedClient(t, { kind: 'tv' });
    const user = await seedUser(t);
    const tokens = await signIn(t, tv, user.userId);
    expect((await userinfo(t, tokens.access_token)).statusCode).toBe(200);
    expect((await call('DELETE', `/admin/clients/${tv.clientId}`)).body).toEqual({ deleted: true });
    expect((await userinfo(t, tokens.access_token)).statusCode).toBe(401);
    expect((await call('GET', `/admin/clients/${tv.clientId}`)).status).toBe(404);
    expect((await call('DELETE', `/admin/clients/${tv.clientId}`)).status).toBe(404);
  });
});

describe('users, their devices and apps', () => {
  it('create (argon2id), a taken email is 409 saying where to look, list and search page in email order, show has no hash', async () => {
    const created = await call('POST', '/admin/users', { email: 'Ada@Example.test', password: PASSWORD, name: 'Ada Lovelace' });
    expect(created.status).toBe(201);
    const again = await call('POST', '/admin/users', { email: 'ada@example.test', password: PASSWORD });
    expect(again.status).toBe(409);
    expect(again.body).toMatchObject({ type: 'urn:device-auth:problem:email-taken' });
    expect(again.body.detail).toContain('/admin/users/ada%40example.test');
    const shown = await call('GET', '/admin/users/ADA@example.test');
    expect(shown.body).toMatchObject({ user_id: created.body.user_id, email: 'ada@example.test', name: 'Ada Lovelace', banned: false });
    expect(JSON.stringify(shown.body)).not.toContain('argon2');
    const found = await call('GET', '/admin/users?search=lovelace');
    expect(found.body.items.map((u: { email: string }) => u.email)).toEqual(['ada@example.test']);
    const first = await call('GET', '/admin/users?limit=1');
    expect(first.body.items).toHaveLength(1);
    expect(first.body.next_after).toBe(first.body.items[0].email);
  });

  it('five creations of one email at once: one user, four 409s', async () => {
    const answers = await Promise.all(Array.from({ length: 5 }, () => call('POST', '/admin/users', { email: 'race@example.test', password: PASSWORD })));
    expect(answers.map((a) => a.status).sort()).toEqual([201, 409, 409, 409, 409]);
  });

  it('devices and apps list what the pages list; signing a device out or removing an app stops its tokens at once', async () => {
    const user = await seedUser(t);
    const tv = await seedClient(t, { kind: 'tv', name: 'Den TV' });
    const bot = await seedClient(t, { kind: 'bot', type: 'confidential', name: 'Den Bot' });
    const tvTokens = await signIn(t, tv, user.userId, undefined, { platform_name: 'Den' });
    const botTokens = await signIn(t, bot, user.userId);
    const devices = await call('GET', `/admin/users/${encodeURIComponent(user.email)}/devices`);
    expect(devices.body.items.map((d: { app: string }) => d.app).sort()).toEqual(['Den Bot', 'Den TV']);
    const tvDevice = devices.body.items.find((d: { app: string }) => d.app === 'Den TV');
    expect(tvDevice).toMatchObject({ client_id: tv.clientId, platform_name: 'Den' });
    const apps = await call('GET', `/admin/users/${encodeURIComponent(user.email)}/apps`);
    expect(apps.body.items.map((a: { client_id: string }) => a.client_id).sort()).toEqual([tv.clientId, bot.clientId].sort());

    expect((await call('DELETE', `/admin/users/${encodeURIComponent(user.email)}/devices/${tvDevice.grant_id}`)).body).toEqual({ signed_out: true });
    expect((await userinfo(t, tvTokens.access_token)).statusCode).toBe(401);
    expect((await call('DELETE', `/admin/users/${encodeURIComponent(user.email)}/devices/${tvDevice.grant_id}`)).status).toBe(404);
    expect((await call('DELETE', `/admin/users/${encodeURIComponent(user.email)}/apps/${bot.clientId}`)).body).toEqual({ removed: true });
    expect((await userinfo(t, botTokens.access_token)).statusCode).toBe(401);
    expect((await call('GET', `/admin/users/${encodeURIComponent(user.email)}/apps`)).body.items).toEqual([]);
    // Another user's device is not this user's to sign out.
    const other = await seedUser(t);
    const otherTokens = await signIn(t, tv, other.userId);
    const otherDevice = (await call('GET', `/admin/users/${encodeURIComponent(other.email)}/devices`)).body.items[0];
    expect((await call('DELETE', `/admin/users/${encodeURIComponent(user.email)}/devices/${otherDevice.grant_id}`)).status).toBe(404);
    expect((await userinfo(t, otherTokens.access_token)).statusCode).toBe(200);
  });

  it('ban stops every token at once, unban lets the user sign in again; delete removes the user and their tokens', async () => {
    const tv = await seedClient(t, { kind: 'tv' });
    const user = await seedUser(t);
    const tokens = await signIn(t, tv, user.userId);
    const banned = await call('POST', `/admin/users/${encodeURIComponent(user.email)}/ban`);
    expect(banned.body).toMatchObject({ user_id: user.userId, banned: true, revoked_grants: 1 });
    expect((await userinfo(t, tokens.access_token)).statusCode).toBe(401);
    expect((await call('POST', `/admin/users/${encodeURIComponent(user.email)}/unban`)).body).toMatchObject({ banned: false });
    const fresh = await signIn(t, tv, user.userId);
    expect((await call('DELETE', `/admin/users/${encodeURIComponent(user.email)}`)).body).toEqual({ deleted: true });
    expect((await userinfo(t, fresh.access_token)).statusCode).toBe(401);
    expect((await call('GET', `/admin/users/${encodeURIComponent(user.email)}`)).status).toBe(404);
    for (const action of ['ban', 'unban']) expect((await call('POST', `/admin/users/nobody@example.test/${action}`)).status).toBe(404);
  });
});

describe('events, purge and housekeeping', () => {
  it('events by user, by client and since a time, in order, a page at a time; an unknown user is 404, an unknown app has none', async () => {
    const tv = await seedClient(t, { kind: 'tv', name: 'Events TV' });
    const user = await seedUser(t);
    await signIn(t, tv, user.userId);
    await signIn(t, tv, user.userId);
    const byUser = await call('GET', `/admin/events?user=${encodeURIComponent(user.email)}`);
    expect(byUser.body.items.map((e: { type: string }) => e.type)).toEqual([
      'user.created',
      'device_request.approved',
      'grant.issued',
      'device_request.approved',
      'grant.issued',
    ]);
    const byClient = await call('GET', `/admin/events?client=${tv.clientId}&limit=1`);
    expect(byClient.body.items).toHaveLength(1);
    const next = await call('GET', `/admin/events?client=${tv.clientId}&limit=1&after=${byClient.body.next_after}`);
    expect(next.body.items).toHaveLength(1);
    expect(Number(next.body.items[0].event_id)).toBeGreaterThan(Number(byClient.body.items[0].event_id));
    const future = new Date(t.clock.now().getTime() + 3600_000).toISOString();
    expect((await call('GET', `/admin/events?client=${tv.clientId}&since=${future}`)).body.items).toEqual([]);
    expect((await call('GET', '/admin/events?user=nobody@example.test')).status).toBe(404);
    expect((await call('GET', '/admin/events?client=tv_nothing')).body).toEqual({ items: [], next_after: null });
    expect((await call('GET', '/admin/events?since=yesterday')).status).toBe(400);
  });

  it('purge runs now and says what it deleted; housekeeping reports the last run', async () => {
    const purged = await call('POST', '/admin/purge');
    expect(purged.status).toBe(200);
    expect(Object.keys(purged.body).sort()).toEqual([
      'accessTokens',
      'authorizationCodes',
      'browserSessions',
      'deliveries',
      'deviceRequests',
      'dpopProofs',
      'events',
      'grants',
      'platformIcons',
      'rateLimitCounters',
      'securityEventTokens',
    ]);
    const health = await call('GET', '/admin/housekeeping');
    expect(health.body).toMatchObject({ running: false, consecutive_failures: 0, healthy: true, last_run: { outcome: 'done', purged: purged.body } });
  });
});

describe('what an app may do is registered (issue 21 §1)', () => {
  it('a web app is registered with exact redirect URIs, post-logout redirect URIs and its grant types; show and update speak of all three', async () => {
    const created = await call('POST', '/admin/clients', {
      name: 'Shop',
      kind: 'web',
      type: 'confidential',
      grant_types: ['authorization_code', 'refresh_token'],
      redirect_uris: ['https://shop.example/callback', 'http://127.0.0.1:8765/cb', 'http://[::1]/cb'],
      post_logout_redirect_uris: ['https://shop.example/signed-out'],
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    expect(created.body).toMatchObject({
      grant_types: ['authorization_code', 'refresh_token'],
      redirect_uris: ['https://shop.example/callback', 'http://127.0.0.1:8765/cb', 'http://[::1]/cb'],
      post_logout_redirect_uris: ['https://shop.example/signed-out'],
    });
    const clientId = created.body.client_id;
    expect((await call('GET', `/admin/clients/${clientId}`)).body).toMatchObject({
      grant_types: ['authorization_code', 'refresh_token'],
      post_logout_redirect_uris: ['https://shop.example/signed-out'],
    });
    const changed = await call('PATCH', `/admin/clients/${clientId}`, { grant_types: [DEVICE_GRANT], redirect_uris: [], post_logout_redirect_uris: [] });
    expect(changed.status).toBe(200);
    expect(changed.body).toMatchObject({ grant_types: [DEVICE_GRANT], redirect_uris: [], post_logout_redirect_uris: [] });
    const tv = await call('POST', '/admin/clients', { name: 'Plain TV', kind: 'tv', type: 'public' });
    expect(tv.body).toMatchObject({ grant_types: [DEVICE_GRANT, 'refresh_token'], redirect_uris: [], post_logout_redirect_uris: [] });
  });

  it('a redirect URI or post-logout redirect URI without the authorization_code grant is refused, saying to add the grant; nothing is written', async () => {
    const before = (await call('GET', '/admin/clients?limit=100')).body.items.length;
    for (const body of [
      // The kind's default grant types (device_code) never use a redirect URI.
      { redirect_uris: ['https://shop.example/callback'] },
      { grant_types: [DEVICE_GRANT, 'refresh_token'], redirect_uris: ['https://shop.example/callback'] },
      { grant_types: [DEVICE_GRANT], post_logout_redirect_uris: ['https://shop.example/signed-out'] },
    ]) {
      const res = await call('POST', '/admin/clients', { name: 'Shop', kind: 'web', type: 'confidential', ...body });
      expect(res.status, JSON.stringify(res.body)).toBe(400);
      expect(JSON.stringify(res.body)).toContain('add authorization_code to grant_types');
    }
    expect((await call('GET', '/admin/clients?limit=100')).body.items.length).toBe(before);

    const web = await call('POST', '/admin/clients', {
      name: 'Shop',
      kind: 'web',
      type: 'public',
      grant_types: ['authorization_code'],
      redirect_uris: ['https://shop.example/callback'],
    });
    expect(web.status).toBe(201);
    const path = `/admin/clients/${web.body.client_id}`;
    // Taking the grant away while its URIs stay would leave them unusable: refused, unchanged.
    const dropped = await call('PATCH', path, { grant_types: [DEVICE_GRANT] });
    expect(dropped.status).toBe(409);
    expect(dropped.body.detail).toContain('add authorization_code to grant_types');
    const device = await call('POST', '/admin/clients', { name: 'Plain TV', kind: 'tv', type: 'public' });
    const postLogout = await call('PATCH', `/admin/clients/${device.body.client_id}`, { post_logout_redirect_uris: ['https://tv.example/bye'] });
    expect(postLogout.status).toBe(409);
    expect((await call('GET', path)).body).toMatchObject({ grant_types: ['authorization_code'], redirect_uris: ['https://shop.example/callback'] });
    expect((await call('GET', `/admin/clients/${device.body.client_id}`)).body).toMatchObject({ post_logout_redirect_uris: [] });
  });

  it.each([
    ['plain http to a host', 'http://shop.example/bye'],
    ['a fragment', 'https://shop.example/bye#frag'],
    ['a NUL', 'https://shop.example/b\u0000ye'],
    ['a lone surrogate', 'https://shop.example/b\ud800ye'],
  ])('a post-logout redirect URI with %s is refused with 400 naming the field, as a redirect URI is', async (_what, uri) => {
    const res = await call('POST', '/admin/clients', {
      name: 'Shop',
      kind: 'web',
      type: 'confidential',
      grant_types: ['authorization_code'],
      redirect_uris: ['https://shop.example/callback'],
      post_logout_redirect_uris: [uri],
    });
    expect(res.status).toBe(400);
    expect(res.body.errors[0].path).toContain('post_logout_redirect_uris');
  });

  it.each([
    ['plain http to a host', 'http://shop.example/callback', 'https'],
    ['http to localhost (RFC 8252 §8.3)', 'http://localhost:8080/cb', 'https'],
    ['a fragment', 'https://shop.example/cb#frag', 'fragment'],
    ['an empty fragment', 'https://shop.example/cb#', 'fragment'],
    ['a user name', 'https://user@shop.example/cb', 'user name'],
    ['a relative URL', '/callback', 'absolute'],
    ['a URL not as the parser writes it', 'HTTPS://Shop.example/cb', 'written as https://shop.example/cb'],
    ['a javascript: URL', 'javascript:alert(1)', 'https'],
    ['a NUL', 'https://shop.example/c\u0000b', 'NUL'],
    ['a lone surrogate', 'https://shop.example/\ud800', ''],
    ['more than 2000 characters', `https://shop.example/${'a'.repeat(2000)}`, ''],
  ])('a redirect URI with %s is refused with 400 naming the field, and nothing is written', async (_what, uri, words) => {
    const before = (await call('GET', '/admin/clients?limit=500')).body.items.length;
    const res = await call('POST', '/admin/clients', { name: 'Shop', kind: 'web', type: 'confidential', redirect_uris: [uri] });
    expect(res.status).toBe(400);
    expect(res.body.errors[0].path).toContain('redirect_uris');
    expect(JSON.stringify(res.body.errors)).toContain(words);
    expect((await call('GET', '/admin/clients?limit=500')).body.items.length).toBe(before);
  });

  it('introspection is off unless asked: a confidential web app is a resource server only with introspection: true (issue 28 §4)', async () => {
    const signInOnly = await call('POST', '/admin/clients', { name: 'Shop', kind: 'web', type: 'confidential' });
    expect(signInOnly.body.introspection).toBe(false);
    const resourceServer = await call('POST', '/admin/clients', { name: 'Photo API', kind: 'web', type: 'confidential', introspection: true });
    expect(resourceServer.body.introspection).toBe(true);
    expect((await call('GET', `/admin/clients/${resourceServer.body.client_id}`)).body.introspection).toBe(true);
    const bot = await call('POST', '/admin/clients', { name: 'Bot', kind: 'bot', type: 'confidential', introspection: true });
    expect(bot.status).toBe(400);
    expect(JSON.stringify(bot.body.errors)).toContain('introspection');
  });

  it('a grant type nobody knows, or none at all, is refused', async () => {
    for (const grant_types of [['implicit'], ['password'], []]) {
      const res = await call('POST', '/admin/clients', { name: 'Odd', kind: 'tv', type: 'public', grant_types });
      expect(res.status, JSON.stringify(grant_types)).toBe(400);
      expect(res.body.errors[0].path).toContain('grant_types');
    }
  });
});

describe('errors are problem details, and bad input loses nothing', () => {
  const hostile = [
    ['a NUL', 'Bad\u0000Bot'],
    ['a lone surrogate', 'Bad\ud800Bot'],
  ];
  it.each(hostile)('a client name with %s is refused with 400, and no client is written', async (_what, name) => {
    const before = (await call('GET', '/admin/clients?limit=500')).body.items.length;
    const res = await call('POST', '/admin/clients', { name, kind: 'tv', type: 'public' });
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ type: 'urn:device-auth:problem:invalid-input', status: 400 });
    expect(res.body.errors[0].path).toContain('name');
    expect((await call('GET', '/admin/clients?limit=500')).body.items.length).toBe(before);
  });

  it('a body that is not UTF-8, not JSON, or not JSON at all is refused with a problem, never half-read', async () => {
    const auth = { authorization: `Bearer ${ADMIN_TOKEN}` };
    const cases: [Record<string, string>, BodyInit, number][] = [
      [{ 'content-type': 'application/json' }, Buffer.from([0x7b, 0x22, 0x6e, 0x61, 0x6d, 0x65, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0x22, 0x7d]), 400],
      [{ 'content-type': 'application/json' }, '{"name": ', 400],
      [{ 'content-type': 'application/x-www-form-urlencoded' }, 'name=x', 415],
    ];
    for (const [headers, body, status] of cases) {
      const res = await raw({ path: '/admin/clients', method: 'POST', headers: { ...auth, ...headers }, body });
      expect(res.status).toBe(status);
      expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      const problem = await res.json();
      expect(problem).toMatchObject({ status });
      expect(typeof problem.detail).toBe('string');
    }
  });

  it('a NUL or a lone surrogate in a path, a cursor or a filter is a 400, never a database error', async () => {
    for (const bad of ['a\u0000@example.test', 'a\ud800@example.test']) {
      const encoded = encodeURIComponent(bad.replace('\ud800', '\u00e9')).replace('%C3%A9', '%ED%A0%80');
      for (const url of [`/admin/users/${encoded}`, `/admin/users?after=${encoded}`, `/admin/events?user=${encoded}`, `/admin/clients?after=${encoded}`]) {
        const res = await call('GET', url);
        expect(res.status, url).toBe(400);
        // Refused by the strict query parser or by the route's schema: a problem either way.
        expect(res.body, url).toMatchObject({ status: 400, title: expect.any(String) });
      }
    }
  });

  it('paging bounds, an unknown route and a malformed id are problems too', async () => {
    for (const url of ['/admin/clients?limit=0', '/admin/clients?limit=501', '/admin/users?limit=ten']) expect((await call('GET', url)).status).toBe(400);
    const unknown = await call('GET', '/admin/nothing');
    expect(unknown.status).toBe(404);
    expect(unknown.body.detail).toContain('/admin/openapi.json');
    expect((await call('GET', `/admin/clients/${encodeURIComponent('tv_\u0000')}`)).status).toBe(400);
  });
});

describe('the OpenAPI document and the audit log', () => {
  it('/admin/openapi.json is OpenAPI 3.1 generated from the routes, and needs the token', async () => {
    expect((await raw({ path: '/admin/openapi.json' })).status).toBe(401);
    const doc = (await call('GET', '/admin/openapi.json')).body;
    expect(doc.openapi).toBe('3.1.0');
    const routes = Object.entries(doc.paths as Record<string, object>).flatMap(([p, ops]) => Object.keys(ops).map((m) => `${m.toUpperCase()} ${p}`));
    for (const route of [
      'GET /admin/clients',
      'POST /admin/clients',
      'GET /admin/clients/{clientId}',
      'PATCH /admin/clients/{clientId}',
      'POST /admin/clients/{clientId}/disable',
      'POST /admin/clients/{clientId}/enable',
      'POST /admin/clients/{clientId}/secret',
      'DELETE /admin/clients/{clientId}',
      'GET /admin/users',
      'POST /admin/users',
      'GET /admin/users/{email}',
      'POST /admin/users/{email}/ban',
      'POST /admin/users/{email}/unban',
      'DELETE /admin/users/{email}',
      'GET /admin/users/{email}/devices',
      'DELETE /admin/users/{email}/devices/{grantId}',
      'GET /admin/users/{email}/apps',
      'DELETE /admin/users/{email}/apps/{clientId}',
      'GET /admin/events',
      'POST /admin/purge',
      'GET /admin/housekeeping',
    ]) {
      expect(routes).toContain(route);
    }
    expect(doc.paths['/admin/clients'].post.requestBody.content['application/json'].schema.properties.kind.enum).toEqual(['tv', 'bot', 'web']);
    expect(doc.components.securitySchemes.adminToken).toEqual({ type: 'http', scheme: 'bearer' });
  });

  it('every change is logged with who and what, and no secret or password reaches the log', async () => {
    const bot = await seedClient(t, { kind: 'bot', type: 'confidential' });
    const before = logLines.length;
    const rotated = await call('POST', `/admin/clients/${bot.clientId}/secret`, { grace_period_seconds: 60 });
    await call('POST', '/admin/users', { email: 'logged@example.test', password: 'a password nobody may read' });
    await raw({ path: '/admin/users/logged@example.test/ban', method: 'POST', headers: { authorization: 'Bearer wrong' } });
    const lines = logLines.slice(before);
    const audits = lines
      .map((line) => JSON.parse(line))
      .filter((entry) => entry.audit)
      .map((entry) => entry.audit);
    expect(audits).toContainEqual(
      expect.objectContaining({
        actor: 'admin-token',
        via: 'tcp',
        action: 'client.rotate_secret',
        target: bot.clientId,
        status: 200,
        details: { grace_period_seconds: 60 },
      }),
    );
    expect(audits).toContainEqual(expect.objectContaining({ action: 'user.create', target: 'logged@example.test', status: 201 }));
    expect(audits).toContainEqual(expect.objectContaining({ route: 'POST /admin/users/:email/ban', status: 401 }));
    const all = lines.join('\n');
    expect(all).not.toContain(rotated.body.client_secret);
    expect(all).not.toContain('a password nobody may read');
    expect(all).not.toContain(ADMIN_TOKEN);
  });
});

describe("the server's socket", () => {
  it("is created owner-only (0600) by the server's listener code", async () => {
    const { startAdminListeners } = await import('../../src/admin-listeners.js');
    const own = path.join(folder, 'own.sock');
    const deps: Deps = { ...t.deps, config: { ...t.deps.config, admin: { ...t.deps.config.admin, socket: own, port: undefined } } };
    const listeners = await startAdminListeners(deps, pino({ level: 'silent' }));
    try {
      expect(statSync(own).mode & 0o777).toBe(0o600);
      expect((await call('GET', '/admin/clients?limit=1', undefined, remoteAdmin({ socketPath: own }, ADMIN_TOKEN))).status).toBe(200);
      // A second server on the same socket is refused rather than stealing it.
      await expect(startAdminListeners(deps, pino({ level: 'silent' }))).rejects.toThrow(/in use/);
    } finally {
      await listeners.close();
    }
  });
});
