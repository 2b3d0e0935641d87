import { sql } from 'kysely';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { recordEvents } from '../../src/events/event-log.js';
import { randomBytes } from 'node:crypto';
import { rewrapAll, webhookSecretIdentity } from '../../src/keys/key-encryption.js';
import { Sealer } from '../../src/keys/sealing.js';
import type { HostResolver } from '../../src/lib/outbound-address.js';
import { startTestApp, TEST_KEY_ENCRYPTION_KEY, type TestApp } from '../helpers/app.js';
import { type Receiver, startReceiver } from '../helpers/receiver.js';
import { ADMIN_TOKEN, type AdminApi, drainWebhooks, startAdminApi, verified } from './helpers.js';

/**
 * Issue 32 §2: the webhooks of the admin API. Registration, listing (never a secret), pause,
 * resume, removal, the delivery log and replay, each change with its event; hostile input on every
 * new field; SSRF refused at registration and again at every delivery.
 */

vi.setConfig({ testTimeout: 60_000, hookTimeout: 120_000 });

/** Names the tests make up: resolved here, never through DNS. */
const NAMES: Record<string, string> = {
  'loopback.example': '127.0.0.1',
  'private.example': '10.0.0.7',
  'metadata.example': '169.254.169.254',
  'mapped.example': '::ffff:127.0.0.1',
};
const resolve: HostResolver = async (hostname) => {
  const address = NAMES[hostname] ?? (/^[\d.]+$|:/.test(hostname) ? hostname : undefined);
  if (address === undefined) throw Object.assign(new Error('ENOTFOUND'), { code: 'ENOTFOUND' });
  return [{ address, family: address.includes(':') ? 6 : 4 }];
};

/** Loopback receivers allowed, as in tests of delivery. */
let t: TestApp;
let admin: AdminApi;
/** As in production: no loopback, every receiver https on a public address. */
let strict: TestApp;
let strictAdmin: AdminApi;
const receivers: Receiver[] = [];
beforeAll(async () => {
  t = await startTestApp({ env: { EVENTS_ALLOW_LOOPBACK: 'true', ADMIN_TOKEN }, outbound: { resolve } });
  admin = await startAdminApi(t.deps);
  strict = await startTestApp({ env: { ADMIN_TOKEN }, outbound: { resolve } });
  strictAdmin = await startAdminApi(strict.deps);
});
afterAll(async () => {
  await admin?.close();
  await strictAdmin?.close();
  await t?.close();
  await strict?.close();
});
afterEach(async () => {
  for (const api of [admin, strictAdmin]) {
    for (const hook of (await api.call('GET', '/admin/webhooks?limit=500')).body.items) await api.call('DELETE', `/admin/webhooks/${hook.id}`);
  }
  for (const receiver of receivers.splice(0)) await receiver.close();
});

async function receiver(): Promise<Receiver> {
  const started = await startReceiver();
  receivers.push(started);
  return started;
}

const webhookEvents = (app: TestApp) =>
  app.deps.db.selectFrom('events').select(['type', 'reason', 'data', 'actor']).where('type', 'like', 'webhook.%').orderBy('event_id').execute();
const count = async (app: TestApp, table: 'webhooks' | 'events') =>
  (await app.deps.db.selectFrom(table).select(sql<number>`count(*)::int`.as('n')).executeTakeFirstOrThrow()).n;

describe('registering, listing and changing endpoints', () => {
  it('add prints the id and a whsec_ secret once; no listing, event or row shows it again, and each change writes its event with its actor', async () => {
    const hooks = await receiver();
    const added = await admin.call('POST', '/admin/webhooks', { url: hooks.url(), events: ['grant.revoked', 'user.banned', 'grant.revoked'] });
    expect(added.status).toBe(201);
    expect(Object.keys(added.body).sort()).toEqual(['id', 'secret']);
    const { id, secret } = added.body as { id: string; secret: string };
    expect(id).toMatch(/^wh_[A-Za-z0-9_-]{16}$/);
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);

    const listed = await admin.call('GET', '/admin/webhooks');
    expect(listed.body.items).toEqual([
      {
        id,
        url: hooks.url(),
        events: ['grant.revoked', 'user.banned'],
        status: 'active',
        paused_reason: null,
        paused_at: null,
        failing_since: null,
        pending: 0,
        created_at: expect.any(String),
      },
    ]);
    const shown = await admin.call('GET', `/admin/webhooks/${id}`);
    for (const body of [listed.body, shown.body]) expect(JSON.stringify(body)).not.toContain(secret.slice(6));

    // Sealed at rest: the row holds no trace of it, and opens only as its own row.
    const row = await t.deps.db.selectFrom('webhooks').select('sealed_secret').where('webhook_id', '=', id).executeTakeFirstOrThrow();
    expect(Buffer.from(row.sealed_secret).includes(Buffer.from(secret.slice(6)))).toBe(false);
    expect(t.deps.sealer.open(row.sealed_secret, webhookSecretIdentity(id)).toString()).toBe(secret);
    expect(() => t.deps.sealer.open(row.sealed_secret, webhookSecretIdentity('wh_0000000000000000'))).toThrow();

    expect((await admin.call('POST', `/admin/webhooks/${id}/pause`)).body).toMatchObject({ id, status: 'paused', paused_reason: 'operator' });
    // Again: nothing changes, no event.
    expect((await admin.call('POST', `/admin/webhooks/${id}/pause`)).body).toMatchObject({ status: 'paused' });
    expect((await admin.call('POST', `/admin/webhooks/${id}/resume`)).body).toMatchObject({ id, status: 'active', paused_reason: null });
    expect((await admin.call('DELETE', `/admin/webhooks/${id}`)).body).toEqual({ deleted: true });
    expect((await admin.call('GET', `/admin/webhooks/${id}`)).status).toBe(404);

    const events = (await webhookEvents(t)).filter((e) => (e.data as { webhook_id: string }).webhook_id === id);
    expect(events.map((e) => [e.type, e.reason])).toEqual([
      ['webhook.created', null],
      ['webhook.changed', 'paused'],
      ['webhook.changed', 'resumed'],
      ['webhook.deleted', null],
    ]);
    for (const event of events) expect(event.actor).toEqual({ kind: 'admin', via: 'token', address: '127.0.0.1' });
    expect(JSON.stringify(events)).not.toContain(secret.slice(6));
  });

  it('without events it takes every type; an unknown type, an empty list or a field the API does not know is refused and nothing is stored', async () => {
    const hooks = await receiver();
    const all = await admin.call('POST', '/admin/webhooks', { url: hooks.url() });
    expect(all.status).toBe(201);
    expect((await admin.call('GET', `/admin/webhooks/${all.body.id}`)).body.events).toBeNull();
    const before = [await count(t, 'webhooks'), await count(t, 'events')];
    for (const body of [
      { url: hooks.url(), events: ['grant.revoked', 'grant.exploded'] },
      { url: hooks.url(), events: [] },
      { url: hooks.url(), events: 'grant.revoked' },
      { url: hooks.url(), secret: 'whsec_mine' },
      { events: ['grant.revoked'] },
    ]) {
      const res = await admin.call('POST', '/admin/webhooks', body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.type).toBe('urn:device-auth:problem:invalid-input');
    }
    expect([await count(t, 'webhooks'), await count(t, 'events')]).toEqual(before);
  });

  it('an unknown id is a 404 on every route', async () => {
    const id = 'wh_0000000000000000';
    for (const [method, path, body] of [
      ['GET', `/admin/webhooks/${id}`],
      ['POST', `/admin/webhooks/${id}/pause`],
      ['POST', `/admin/webhooks/${id}/resume`],
      ['DELETE', `/admin/webhooks/${id}`],
      ['GET', `/admin/webhooks/${id}/deliveries`],
      ['POST', `/admin/webhooks/${id}/replay`, { since: '2026-01-01T00:00:00Z' }],
    ] as const) {
      expect((await admin.call(method, path, body)).status, `${method} ${path}`).toBe(404);
    }
  });
});

describe('hostile input on every new field', () => {
  it('NUL, lone surrogates, invalid UTF-8 and huge values are a clear 400 (413 past the body limit), and nothing is stored', async () => {
    const hooks = await receiver();
    const { id } = (await admin.call('POST', '/admin/webhooks', { url: hooks.url() })).body;
    const before = [await count(t, 'webhooks'), await count(t, 'events')];
    const bodies: [string, unknown][] = [
      ['a NUL in the URL', { url: `${hooks.url()}\u0000` }],
      ['a lone surrogate in the URL', { url: `${hooks.url()}/\ud800` }],
      ['a huge URL', { url: `${hooks.url()}/${'a'.repeat(50_000)}` }],
      ['a URL that is no URL', { url: 'not a url at all' }],
      ['a URL of another type', { url: 42 }],
      ['a NUL in a type', { url: hooks.url(), events: ['grant.revoked\u0000'] }],
      ['a lone surrogate in a type', { url: hooks.url(), events: ['\udc00'] }],
      ['a huge type', { url: hooks.url(), events: ['x'.repeat(10_000)] }],
      ['too many types', { url: hooks.url(), events: Array.from({ length: 1000 }, () => 'grant.revoked') }],
    ];
    for (const [name, body] of bodies) {
      const res = await admin.call('POST', '/admin/webhooks', body);
      expect(res.status, `${name}: ${JSON.stringify(res.body).slice(0, 200)}`).toBe(400);
      expect(res.body.type, name).toBe('urn:device-auth:problem:invalid-input');
    }
    for (const [name, since] of [
      ['a NUL', '2026-01-01T00:00:00Z\u0000'],
      ['a lone surrogate', '2026-01-01T00:00:00Z\ud800'],
      ['no time', 'yesterday'],
      ['huge', '2'.repeat(50_000)],
    ]) {
      const res = await admin.call('POST', `/admin/webhooks/${id}/replay`, { since });
      expect(res.status, name).toBe(400);
    }
    for (const path of [
      `/admin/webhooks/${encodeURIComponent(`${id}\u0000`)}`,
      // A lone surrogate's bytes (not UTF-8) in the path and in a query.
      '/admin/webhooks/wh_%ED%A0%80abcdefghijklm/pause',
      `/admin/webhooks/${'w'.repeat(5000)}/resume`,
      `/admin/webhooks/${id}/deliveries?after=${encodeURIComponent('1\u0000')}`,
      `/admin/webhooks/${id}/deliveries?limit=100000`,
      '/admin/webhooks?after=wh_%ED%B0%80',
    ]) {
      const method = path.endsWith('pause') || path.endsWith('resume') ? 'POST' : 'GET';
      expect((await admin.call(method, path)).status, path).toBe(400);
    }
    const raw = (bytes: Buffer) =>
      fetch(`${admin.url}/admin/webhooks`, {
        method: 'POST',
        headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
        body: bytes as unknown as BodyInit,
      });
    const invalidUtf8 = await raw(Buffer.concat([Buffer.from(`{"url":"${hooks.url()}/`), Buffer.from([0xc3, 0x28]), Buffer.from('"}')]));
    expect(invalidUtf8.status).toBe(400);
    expect((await invalidUtf8.json()).type).toBe('urn:device-auth:problem:invalid-input');
    expect((await raw(Buffer.from(JSON.stringify({ url: `${hooks.url()}/${'a'.repeat(2_000_000)}` })))).status).toBe(413);
    expect([await count(t, 'webhooks'), await count(t, 'events')]).toEqual(before);
  });
});

describe('SSRF', () => {
  it('registration refuses http, private, loopback, link-local, unique-local and IPv4-mapped literals and loopback names; loopback only with EVENTS_ALLOW_LOOPBACK', async () => {
    const refused = [
      'http://hooks.example.com/',
      'https://10.0.0.1/hook',
      'https://172.16.5.4/hook',
      'https://192.168.1.10/hook',
      'https://127.0.0.1/hook',
      'https://0x7f000001/hook',
      'https://[::1]/hook',
      'https://169.254.169.254/latest/meta-data/',
      'https://[fe80::1]/hook',
      'https://[fd12:3456::1]/hook',
      'https://[::ffff:127.0.0.1]/hook',
      'https://[::ffff:169.254.169.254]/hook',
      'https://localhost/hook',
      'https://0.0.0.0/hook',
      'https://user:password@hooks.example.com/',
      'file:///etc/passwd',
    ];
    const before = await count(strict, 'webhooks');
    for (const url of refused) {
      const res = await strictAdmin.call('POST', '/admin/webhooks', { url });
      expect(res.status, url).toBe(400);
      expect(res.body.detail, url).toMatch(/^body\.url: /);
    }
    expect(await count(strict, 'webhooks')).toBe(before);
    // A public address or a name is accepted (a name is judged at each delivery).
    expect((await strictAdmin.call('POST', '/admin/webhooks', { url: 'https://hooks.example.com/device-auth' })).status).toBe(201);
    expect((await strictAdmin.call('POST', '/admin/webhooks', { url: 'https://93.184.215.14/hook' })).status).toBe(201);
    // With the switch, loopback (over http too), and still nothing else private.
    expect((await admin.call('POST', '/admin/webhooks', { url: 'http://127.0.0.1:9/hook' })).status).toBe(201);
    expect((await admin.call('POST', '/admin/webhooks', { url: 'http://[::1]:9/hook' })).status).toBe(201);
    for (const url of ['http://10.0.0.1/hook', 'https://10.0.0.1/hook', 'https://169.254.169.254/', 'https://[fd00::1]/']) {
      expect((await admin.call('POST', '/admin/webhooks', { url })).status, url).toBe(400);
    }
  });

  it('at delivery every resolved address is checked: a name resolving to loopback, link-local, an IPv4-mapped loopback or a private address is never connected to', async () => {
    const hooks = await receiver();
    const port = new URL(hooks.origin).port;
    const ids: string[] = [];
    for (const name of ['loopback.example', 'metadata.example', 'mapped.example']) {
      const added = await strictAdmin.call('POST', '/admin/webhooks', { url: `https://${name}:${port}/hook`, events: ['user.banned'] });
      expect(added.status).toBe(201);
      ids.push(added.body.id);
    }
    await recordEvents(strict.deps.db, [{ type: 'user.banned', user_id: '00000000-0000-4000-8000-00000000f001', created_at: strict.clock.now() }]);
    await drainWebhooks(strict);
    for (const id of ids) {
      const log = (await strictAdmin.call('GET', `/admin/webhooks/${id}/deliveries`)).body.items;
      expect(log).toHaveLength(1);
      expect(log[0]).toMatchObject({ http_status: null, error: 'not_public', message_state: 'pending' });
    }
    // Loopback allowed, a name resolving to a private address is still refused.
    const privateName = await admin.call('POST', '/admin/webhooks', { url: `https://private.example:${port}/hook`, events: ['user.banned'] });
    await recordEvents(t.deps.db, [{ type: 'user.banned', user_id: '00000000-0000-4000-8000-00000000f002', created_at: t.clock.now() }]);
    await drainWebhooks(t);
    expect((await admin.call('GET', `/admin/webhooks/${privateName.body.id}/deliveries`)).body.items[0]).toMatchObject({ error: 'not_public' });
    expect(hooks.received).toHaveLength(0);
  });

  it('a redirect is never followed: the 3xx is the answer, logged, retried later, and its Location never visited', async () => {
    const hooks = await receiver();
    const elsewhere = await receiver();
    // The receiver says where to go: another server on this machine, which the switch would allow.
    hooks.answer = () => ({ status: 307, headers: { location: elsewhere.url('/stolen') } });
    const { id } = (await admin.call('POST', '/admin/webhooks', { url: hooks.url(), events: ['user.banned'] })).body;
    await recordEvents(t.deps.db, [{ type: 'user.banned', user_id: '00000000-0000-4000-8000-00000000f003', created_at: t.clock.now() }]);
    await drainWebhooks(t);
    expect(hooks.received).toHaveLength(1);
    expect(elsewhere.received).toHaveLength(0);
    expect((await admin.call('GET', `/admin/webhooks/${id}/deliveries`)).body.items).toEqual([
      expect.objectContaining({ http_status: 307, error: null, message_state: 'pending' }),
    ]);
  });
});

describe('replay and the delivery log', () => {
  it('replay from a time sends again, in order, every event since then that the endpoint takes, with the webhook-ids it was first sent with', async () => {
    const hooks = await receiver();
    const { id, secret } = (await admin.call('POST', '/admin/webhooks', { url: hooks.url(), events: ['grant.rotated'] })).body;
    const grant = '00000000-0000-4000-8000-00000000f100';
    const first = t.clock.now();
    await recordEvents(t.deps.db, [{ type: 'grant.rotated', grant_id: grant, reason: 'r0', created_at: first }]);
    t.clock.advance(60);
    const since = t.clock.now();
    await recordEvents(
      t.deps.db,
      ['r1', 'r2', 'r3'].map((reason) => ({ type: 'grant.rotated' as const, grant_id: grant, reason, created_at: since })),
    );
    await recordEvents(t.deps.db, [{ type: 'user.banned', user_id: '00000000-0000-4000-8000-00000000f101', created_at: since }]);
    await drainWebhooks(t);
    expect(hooks.received.map((d) => verified(d, secret).data.reason)).toEqual(['r0', 'r1', 'r2', 'r3']);
    const replayed = await admin.call('POST', `/admin/webhooks/${id}/replay`, { since: since.toISOString() });
    expect(replayed.body).toEqual({ queued: 3, last_event_at: expect.any(String), complete: true });
    await drainWebhooks(t);
    const again = hooks.received.slice(4);
    expect(again.map((d) => verified(d, secret).data.reason)).toEqual(['r1', 'r2', 'r3']);
    expect(again.map((d) => d.headers['webhook-id'])).toEqual(hooks.received.slice(1, 4).map((d) => d.headers['webhook-id']));
    const log = (await admin.call('GET', `/admin/webhooks/${id}/deliveries?limit=3`)).body;
    expect(log.items.map((a: { http_status: number }) => a.http_status)).toEqual([200, 200, 200]);
    expect(log.next_after).toEqual(log.items[2].attempt_id);
    const rest = (await admin.call('GET', `/admin/webhooks/${id}/deliveries?after=${log.next_after}`)).body;
    expect(rest.items).toHaveLength(4);
    expect(rest.next_after).toBeNull();
    expect((await webhookEvents(t)).at(-1)).toMatchObject({ type: 'webhook.changed', reason: 'replayed', data: { webhook_id: id, queued: 3 } });
  });
});

describe('the key-encryption key', () => {
  it('keys rewrap re-seals every webhook secret under the new key, which alone then opens it', async () => {
    const hooks = await receiver();
    const { id, secret } = (await admin.call('POST', '/admin/webhooks', { url: hooks.url() })).body;
    const current = Buffer.from(TEST_KEY_ENCRYPTION_KEY, 'base64');
    const next = randomBytes(32);
    const sealed = async () =>
      (await t.deps.db.selectFrom('webhooks').select('sealed_secret').where('webhook_id', '=', id).executeTakeFirstOrThrow()).sealed_secret;
    try {
      expect(await rewrapAll(t.deps.db, new Sealer(next, current), { now: t.clock.now(), actor: { kind: 'admin', via: 'cli' } })).toMatchObject({
        webhook_secrets: expect.any(Number),
      });
      const rewrapped = await sealed();
      expect(new Sealer(next).open(rewrapped, webhookSecretIdentity(id)).toString()).toBe(secret);
      expect(() => t.deps.sealer.open(rewrapped, webhookSecretIdentity(id))).toThrow(/sealed under key-encryption key/);
    } finally {
      // Back under the test's key: the app holds it, and the other sealed rows moved too.
      await rewrapAll(t.deps.db, new Sealer(current, next), { now: t.clock.now(), actor: { kind: 'admin', via: 'cli' } });
    }
    expect(t.deps.sealer.open(await sealed(), webhookSecretIdentity(id)).toString()).toBe(secret);
  });
});
