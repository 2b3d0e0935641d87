import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildAdminApp } from '../../src/admin-app.js';
import { hashOpaque } from '../../src/oauth/opaque-tokens.js';
import { afterAnnounced, basicAuth, FORM, form, seedClient, seedUser, startTestApp, type TestApp } from '../helpers/app.js';
import { requestDeviceCode } from '../helpers/device.js';
import { dpopKey, proofFor } from '../helpers/dpop.js';
import { revoke, signIn, type TestClient } from '../helpers/tokens.js';

/**
 * Issue 32 §3: the client_credentials grant (RFC 6749 §4.4), through which a confidential app of
 * any kind obtains a token for itself, with no user, to manage its Shared Signals streams.
 */

let t: TestApp;
let admin: FastifyInstance;
/** A confidential bot registered for the grant, allowed both of an app's own scopes. */
let receiver: TestClient & { clientSecret: string };

const tokenRequest = (client: { clientId: string; clientSecret: string }, fields: Record<string, string> = {}, headers: Record<string, string> = {}) =>
  t.app.inject({
    method: 'POST',
    url: '/oauth/token',
    headers: { ...FORM, authorization: basicAuth(client.clientId, client.clientSecret), ...headers },
    payload: form({ grant_type: 'client_credentials', ...fields }),
  });

const storedToken = (token: string) => t.deps.db.selectFrom('app_access_tokens').selectAll().where('token_hash', '=', hashOpaque(token)).executeTakeFirst();

const adminCall = (method: 'POST' | 'PATCH', url: string, payload: unknown) =>
  admin.inject({ method, url, headers: { 'content-type': 'application/json' }, payload: JSON.stringify(payload) });

/** A confidential bot registered for the grant and to use DPoP (RFC 9449 §5.2): its credentials. */
async function dpopReceiver() {
  const app = await seedClient(t, {
    kind: 'bot',
    type: 'confidential',
    grantTypes: ['client_credentials'],
    scopes: ['ssf.manage'],
    dpopBoundAccessTokens: true,
  });
  return { clientId: app.clientId, clientSecret: app.clientSecret! };
}

beforeAll(async () => {
  t = await startTestApp();
  admin = await buildAdminApp(t.deps, { listener: 'socket', logger: false });
  const created = await seedClient(t, { kind: 'bot', type: 'confidential', grantTypes: ['client_credentials'], scopes: ['ssf.manage', 'ssf.read'] });
  receiver = { clientId: created.clientId, clientSecret: created.clientSecret! };
});
afterAll(async () => {
  await admin?.close();
  await t?.close();
});

describe('the client_credentials grant', () => {
  it('gives a registered confidential app a Bearer token of its own scopes, with no refresh token, no ID token and no user', async () => {
    const res = await tokenRequest(receiver);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.headers['cache-control']).toBe('no-store');
    const body = res.json();
    expect(body).toEqual({
      access_token: expect.stringMatching(/^da_at_/),
      token_type: 'Bearer',
      expires_in: t.config.accessTokenTtl,
      scope: 'ssf.manage ssf.read',
    });
    const row = await storedToken(body.access_token);
    expect(row).toMatchObject({ client_id: receiver.clientId, scopes: ['ssf.manage', 'ssf.read'] });
    // Nothing of a user's: no grant, no user's access token.
    expect(await t.deps.db.selectFrom('grants').select('grant_id').where('client_id', '=', receiver.clientId).execute()).toEqual([]);
    expect(await t.deps.db.selectFrom('access_tokens').select('grant_id').where('client_id', '=', receiver.clientId).execute()).toEqual([]);
  });

  it('narrows to the scope asked for; a scope the app is not allowed, or a user scope, is invalid_scope and stores nothing', async () => {
    const narrowed = await tokenRequest(receiver, { scope: 'ssf.read' });
    expect(narrowed.statusCode, narrowed.body).toBe(200);
    expect(narrowed.json().scope).toBe('ssf.read');

    const readOnly = await seedClient(t, { kind: 'web', type: 'confidential', grantTypes: ['client_credentials'], scopes: ['ssf.read'] });
    const before = await t.deps.db.selectFrom('app_access_tokens').select('token_hash').execute();
    for (const [client, scope] of [
      [readOnly, 'ssf.manage'],
      [receiver, 'openid'],
      [receiver, 'ssf.manage offline_access'],
    ] as const) {
      const res = await tokenRequest({ clientId: client.clientId, clientSecret: client.clientSecret! }, { scope });
      expect(res.statusCode, scope).toBe(400);
      expect(res.json().error).toBe('invalid_scope');
    }
    expect(await t.deps.db.selectFrom('app_access_tokens').select('token_hash').execute()).toHaveLength(before.length);
  });

  it('an app allowed no scope of its own is told so (invalid_scope)', async () => {
    const userScopesOnly = await seedClient(t, { kind: 'tv', type: 'confidential', grantTypes: ['client_credentials'], scopes: ['openid'] });
    const res = await tokenRequest({ clientId: userScopesOnly.clientId, clientSecret: userScopesOnly.clientSecret! });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ error: 'invalid_scope', error_description: expect.stringContaining('ssf.manage') });
  });

  it('an app not registered for the grant is unauthorized_client; a wrong secret is invalid_client', async () => {
    const bot = await seedClient(t, { kind: 'bot', type: 'confidential', scopes: ['ssf.manage'] });
    const unregistered = await tokenRequest({ clientId: bot.clientId, clientSecret: bot.clientSecret! });
    expect(unregistered.statusCode).toBe(400);
    expect(unregistered.json().error).toBe('unauthorized_client');
    const wrong = await tokenRequest({ clientId: receiver.clientId, clientSecret: `${receiver.clientSecret}x` });
    expect(wrong.statusCode).toBe(401);
    expect(wrong.json().error).toBe('invalid_client');
  });

  it('an app registered to use DPoP gets a token bound to its key (RFC 9449 §5), which the Shared Signals endpoints take only as DPoP with a fresh proof of that key', async () => {
    const credentials = await dpopReceiver();
    // Registered to use DPoP: no token without a proof.
    const withoutProof = await tokenRequest(credentials);
    expect(withoutProof.statusCode).toBe(400);
    expect(withoutProof.json().error).toBe('invalid_dpop_proof');

    const key = await dpopKey();
    const res = await tokenRequest(credentials, {}, { dpop: await proofFor(key) });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ token_type: 'DPoP', scope: 'ssf.manage' });
    const token: string = res.json().access_token;
    expect(await storedToken(token)).toMatchObject({ client_id: credentials.clientId, dpop_jkt: key.jkt });

    const call = (headers: Record<string, string>) => t.app.inject({ method: 'GET', url: '/ssf/stream', headers });
    const proof = (options: Parameters<typeof proofFor>[1] = {}) => proofFor(key, { htm: 'GET', htu: '/ssf/stream', accessToken: token, ...options });
    const accepted = await call({ authorization: `DPoP ${token}`, dpop: await proof() });
    expect(accepted.statusCode, accepted.body).toBe(200);
    expect(accepted.json()).toEqual([]);

    // RFC 9449 §7.2: as Bearer, refused whoever presents it.
    const asBearer = await call({ authorization: `Bearer ${token}` });
    expect(asBearer.statusCode).toBe(401);
    expect(asBearer.headers['www-authenticate']).toMatch(/^DPoP /);
    expect(asBearer.json().error).toBe('invalid_token');
    // No proof, another key's, one for another endpoint, one replayed: refused, and nothing is read.
    expect((await call({ authorization: `DPoP ${token}` })).statusCode).toBe(401);
    const other = await dpopKey();
    const otherKey = await call({ authorization: `DPoP ${token}`, dpop: await proofFor(other, { htm: 'GET', htu: '/ssf/stream', accessToken: token }) });
    expect(otherKey.statusCode).toBe(401);
    expect(otherKey.json().error_description).toContain('not the key');
    expect((await call({ authorization: `DPoP ${token}`, dpop: await proof({ htu: '/ssf/status' }) })).statusCode).toBe(401);
    expect((await call({ authorization: `DPoP ${token}`, dpop: await proof({ htm: 'POST' }) })).statusCode).toBe(401);
    const once = await proof();
    expect((await call({ authorization: `DPoP ${token}`, dpop: once })).statusCode).toBe(200);
    const replayed = await call({ authorization: `DPoP ${token}`, dpop: once });
    expect(replayed.statusCode).toBe(401);
    expect(replayed.json().error_description).toContain('already used');

    // A Bearer token of an app not registered for DPoP is refused under the DPoP scheme, even with a proof.
    const bearer = (await tokenRequest(receiver)).json().access_token;
    const bearerAsDpop = await call({ authorization: `DPoP ${bearer}`, dpop: await proofFor(key, { htm: 'GET', htu: '/ssf/stream', accessToken: bearer }) });
    expect(bearerAsDpop.statusCode).toBe(401);
    expect(bearerAsDpop.json().error_description).toContain('not bound');
    expect((await call({ authorization: `Bearer ${bearer}` })).statusCode).toBe(200);
  });

  it('one DPoP proof sent 20 times at once to a Shared Signals endpoint is accepted once; the token endpoint takes each proof once too', async () => {
    const credentials = await dpopReceiver();
    const key = await dpopKey();
    const tokenProof = await proofFor(key);
    const issued = await Promise.all(Array.from({ length: 20 }, () => tokenRequest(credentials, {}, { dpop: tokenProof })));
    expect(issued.map((res) => res.statusCode).sort()).toEqual([200, ...Array(19).fill(400)]);
    const token: string = issued.find((res) => res.statusCode === 200)!.json().access_token;
    const proof = await proofFor(key, { htm: 'GET', htu: '/ssf/stream', accessToken: token });
    const answers = await Promise.all(
      Array.from({ length: 20 }, () => t.app.inject({ method: 'GET', url: '/ssf/stream', headers: { authorization: `DPoP ${token}`, dpop: proof } })),
    );
    expect(answers.map((res) => res.statusCode).sort()).toEqual([200, ...Array(19).fill(401)]);
    for (const refused of answers.filter((res) => res.statusCode === 401)) expect(refused.json().error_description).toContain('already used');
  });

  it('a disabled app gets no token', async () => {
    const app = await seedClient(t, { kind: 'bot', type: 'confidential', grantTypes: ['client_credentials'], scopes: ['ssf.manage'] });
    await afterAnnounced(t, () => t.deps.db.updateTable('clients').set({ disabled_at: t.clock.now() }).where('client_id', '=', app.clientId).execute());
    const res = await tokenRequest({ clientId: app.clientId, clientSecret: app.clientSecret! });
    expect(res.statusCode).toBe(401);
    expect(res.json().error).toBe('invalid_client');
    expect(await t.deps.db.selectFrom('app_access_tokens').select('token_hash').where('client_id', '=', app.clientId).execute()).toEqual([]);
  });

  it('RFC 7009: the app revokes its own token; another app revoking it changes nothing', async () => {
    const token = (await tokenRequest(receiver)).json().access_token as string;
    const other = await seedClient(t, { kind: 'bot', type: 'confidential' });
    expect((await revoke(t, other, token)).statusCode).toBe(200);
    expect(await storedToken(token)).toBeDefined();
    expect((await revoke(t, receiver, token)).statusCode).toBe(200);
    expect(await storedToken(token)).toBeUndefined();
  });
});

describe('registering an app for it', () => {
  it('any kind of confidential app can be; a public app cannot, at creation or by a change, and nothing is stored', async () => {
    for (const kind of ['tv', 'bot', 'web'] as const) {
      const res = await adminCall('POST', '/admin/clients', {
        name: `Receiver ${kind}`,
        kind,
        type: 'confidential',
        grant_types: ['client_credentials'],
        scopes: ['ssf.manage'],
      });
      expect(res.statusCode, res.body).toBe(201);
      expect(res.json()).toMatchObject({ grant_types: ['client_credentials'] });
    }
    const publicOne = await adminCall('POST', '/admin/clients', {
      name: 'Public Receiver',
      kind: 'tv',
      type: 'public',
      grant_types: ['client_credentials'],
      scopes: ['ssf.manage'],
    });
    expect(publicOne.statusCode).toBe(400);
    expect(publicOne.body).toContain('only a confidential app can use the client_credentials grant');
    expect(await t.deps.db.selectFrom('clients').select('client_id').where('name', '=', 'Public Receiver').execute()).toEqual([]);

    const tv = await seedClient(t, { kind: 'tv' });
    const changed = await adminCall('PATCH', `/admin/clients/${tv.clientId}`, { grant_types: ['client_credentials'] });
    expect(changed.statusCode).toBe(409);
    expect(changed.body).toContain('only a confidential app');
    const row = await t.deps.db.selectFrom('clients').select('grant_types').where('client_id', '=', tv.clientId).executeTakeFirstOrThrow();
    expect(row.grant_types).not.toContain('client_credentials');
  });

  it('the database refuses a public app with the grant whatever writes it', async () => {
    await expect(
      t.deps.db
        .insertInto('clients')
        .values({ client_id: 'tv_sneaky', name: 'Sneaky', kind: 'tv', type: 'public', allowed_scopes: ['ssf.manage'], grant_types: ['client_credentials'] })
        .execute(),
    ).rejects.toThrow(/clients_client_credentials_are_confidential/);
  });
});

describe("an app's own scopes are never a user's to grant", () => {
  it('a device request for ssf.manage is invalid_scope; one naming no scope gets only the user scopes the app is allowed', async () => {
    const tv = await seedClient(t, { kind: 'tv', scopes: ['openid', 'offline_access', 'ssf.manage'] });
    const asked = await requestDeviceCode(t, { client_id: tv.clientId, scope: 'openid ssf.manage' });
    expect(asked.statusCode).toBe(400);
    expect(asked.json().error).toBe('invalid_scope');
    const user = await seedUser(t);
    const tokens = await signIn(t, tv, user.userId);
    expect(tokens.scope).toBe('openid offline_access');
  });
});

describe('discovery', () => {
  it('lists the grant and the scopes an app may hold for itself', async () => {
    const meta = (await t.app.inject({ method: 'GET', url: '/.well-known/openid-configuration' })).json();
    expect(meta.grant_types_supported).toContain('client_credentials');
    expect(meta.scopes_supported).toEqual(expect.arrayContaining(['ssf.manage', 'ssf.read']));
  });
});
