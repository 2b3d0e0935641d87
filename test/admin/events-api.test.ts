import type { FastifyInstance } from 'fastify';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildAdminApp } from '../../src/admin-app.js';
import { purgeExpired } from '../../src/housekeeping/purge.js';
import { seedClient, seedUser, startTestApp, type TestApp } from '../helpers/app.js';
import { grantOf, revoke, signIn } from '../helpers/tokens.js';

/**
 * Issue 32 §1: the event log through the admin API, over real HTTP on its TCP listener: the
 * filters (type, user, app, grant, time) and keyset pages; every new input refused clearly when
 * hostile; the live tail (a long poll) in committed order; events that outlive their user, then
 * the retention purge.
 */

const ADMIN_TOKEN = 'an-admin-token-for-the-event-log-0123456789';
let t: TestApp;
let tcp: FastifyInstance;
let base: string;

beforeAll(async () => {
  t = await startTestApp({ env: { ADMIN_TOKEN } });
  tcp = await buildAdminApp(t.deps, { listener: 'tcp', logger: pino({ level: 'silent' }) });
  await tcp.listen({ host: '127.0.0.1', port: 0 });
  base = `http://127.0.0.1:${(tcp.server.address() as { port: number }).port}`;
});
afterAll(async () => {
  await tcp?.close();
  await t?.close();
});

/** A raw request line: the query is sent exactly as written (hostile bytes included). */
async function get(pathAndQuery: string, signal?: AbortSignal) {
  const res = await fetch(`${base}${pathAndQuery}`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` }, ...(signal && { signal }) });
  return { status: res.status, type: res.headers.get('content-type'), body: (await res.json()) as any };
}

async function send(method: string, path: string, body?: object) {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, ...(body && { 'content-type': 'application/json' }) },
    ...(body && { body: JSON.stringify(body) }),
  });
  return { status: res.status, body: (await res.json()) as any };
}

const typesOf = (body: { items: { type: string }[] }) => body.items.map((e) => e.type);

describe('GET /admin/events: filters and pages', () => {
  it('by type (one, a list, the parameter repeated), user (email or id), app, grant and time; each filter narrows, all must hold', async () => {
    const tv = await seedClient(t, { name: 'Filter TV' });
    const other = await seedClient(t, { name: 'Other TV' });
    const user = await seedUser(t);
    const first = await signIn(t, tv, user.userId);
    await signIn(t, other, user.userId);
    t.clock.advance(60);
    await revoke(t, tv, first.access_token);
    const grantId = (await grantOf(t, first.refresh_token!)).grant_id;

    const byUser = await get(`/admin/events?user=${encodeURIComponent(user.email)}`);
    expect(typesOf(byUser.body)).toEqual([
      'user.created',
      'device_request.approved',
      'grant.issued',
      'device_request.approved',
      'grant.issued',
      'grant.revoked',
    ]);
    expect((await get(`/admin/events?user=${user.userId}`)).body.items).toEqual(byUser.body.items);
    expect(typesOf((await get(`/admin/events?user=${user.userId}&type=grant.issued`)).body)).toEqual(['grant.issued', 'grant.issued']);
    expect(typesOf((await get(`/admin/events?user=${user.userId}&type=grant.issued,grant.revoked&app=${tv.clientId}`)).body)).toEqual([
      'grant.issued',
      'grant.revoked',
    ]);
    expect(typesOf((await get(`/admin/events?user=${user.userId}&type=user.created&type=grant.revoked`)).body)).toEqual(['user.created', 'grant.revoked']);
    const byGrant = await get(`/admin/events?grant=${grantId}`);
    expect(byGrant.body.items.map((e: { type: string; reason: string }) => `${e.type}:${e.reason}`)).toEqual([
      'grant.issued:device_code',
      'grant.revoked:revoked_by_app',
    ]);
    expect(byGrant.body.items[1]).toMatchObject({ grant_id: grantId, user_id: user.userId, client_id: tv.clientId, app: 'Filter TV' });
    // The revocation came a minute after the issue: a time between them splits the two.
    const between = new Date(Date.parse(byGrant.body.items[0].at) + 30_000).toISOString();
    expect(typesOf((await get(`/admin/events?grant=${grantId}&until=${between}`)).body)).toEqual(['grant.issued']);
    expect(typesOf((await get(`/admin/events?grant=${grantId}&since=${between}`)).body)).toEqual(['grant.revoked']);
    // Any filter that names nothing: no events, not an error (a deleted app's events would still be there).
    expect((await get(`/admin/events?app=tv_nothingHere&type=grant.issued`)).body).toEqual({ items: [], next_after: null });
  });

  it('keyset pages: after the last event_id of a page, in event_id order, to the end', async () => {
    const user = await seedUser(t);
    const tv = await seedClient(t, { name: 'Paging TV' });
    for (let i = 0; i < 3; i++) await signIn(t, tv, user.userId);
    const seen: string[] = [];
    let after: string | null = null;
    for (let pageNo = 0; pageNo < 20; pageNo++) {
      const res: { body: { items: { event_id: string }[]; next_after: string | null } } = await get(
        `/admin/events?user=${user.userId}&limit=2${after === null ? '' : `&after=${after}`}`,
      );
      seen.push(...res.body.items.map((e) => e.event_id));
      after = res.body.next_after;
      if (after === null) break;
    }
    expect(seen).toHaveLength(7);
    expect(seen.map(Number)).toEqual([...seen.map(Number)].sort((a, b) => a - b));
  });

  it('refuses with a clear 400 problem: an unknown type, a list too long, a NUL, a lone surrogate, invalid UTF-8 or a huge value in any filter', async () => {
    const unknown = await get('/admin/events?type=grant.revoked,grant.exploded');
    expect(unknown.status).toBe(400);
    expect(unknown.type).toContain('application/problem+json');
    expect(unknown.body.detail).toMatch(/type/);
    expect((await get(`/admin/events?type=${Array(60).fill('grant.issued').join(',')}`)).status).toBe(400);
    const hostile = ['%00', 'a%00b', '%ED%A0%80', '%FF', '%C0%AF', 'x'.repeat(5000)];
    const filters = ['type', 'user', 'app', 'client', 'grant', 'since', 'until'];
    for (const route of ['/admin/events', '/admin/events/tail']) {
      for (const name of [...filters, ...(route.endsWith('tail') ? ['position', 'wait'] : ['after', 'limit'])]) {
        for (const value of hostile) {
          const res = await get(`${route}?${name}=${value}&wait=0`);
          expect(res.status, `${route} ${name}=${value.slice(0, 20)}`).toBe(400);
          expect(res.type).toContain('application/problem+json');
          expect(res.body).toMatchObject({ status: 400, detail: expect.any(String) });
        }
      }
    }
    expect((await get('/admin/events?app=tv_a&client=tv_b')).status).toBe(400);
    expect((await get('/admin/events?since=2026-01-02T00:00:00Z&until=2026-01-01T00:00:00Z')).status).toBe(400);
    expect((await get('/admin/events/tail?wait=26')).status).toBe(400);
    expect((await get('/admin/events/tail?position=1-2')).status).toBe(400);
  });

  it('the OpenAPI document describes both routes, their filters and the vocabulary', async () => {
    const document = (await get('/admin/openapi.json')).body;
    expect(Object.keys(document.paths)).toEqual(expect.arrayContaining(['/admin/events', '/admin/events/tail']));
    const names = document.paths['/admin/events'].get.parameters.map((p: { name: string }) => p.name);
    expect(names).toEqual(expect.arrayContaining(['type', 'user', 'app', 'grant', 'since', 'until', 'after', 'limit']));
    expect(JSON.stringify(document.paths['/admin/events'].get.parameters)).toContain('grant.revoked');
  });
});

describe("the user changes that had no route (issue 32 §1's user.changed and user.password_changed)", () => {
  it('PATCH /admin/users/:email and PUT …/password refuse a NUL, a lone surrogate or a huge value with a 400, and store nothing', async () => {
    const user = await seedUser(t);
    const path = `/admin/users/${encodeURIComponent(user.email)}`;
    for (const name of ['a\u0000b', '\ud800', 'x'.repeat(101), '']) {
      const res = await send('PATCH', path, { name });
      expect(res.status, JSON.stringify(name.slice(0, 10))).toBe(400);
      expect(res.body.detail).toMatch(/name/);
    }
    expect((await send('PATCH', path, { name: 'Fine', email: 'other@example.test' })).status).toBe(400);
    for (const password of ['long enough\u0000 password', 'long enough \ud800 password', 'x'.repeat(1025), 'short']) {
      const res = await send('PUT', `${path}/password`, { password });
      expect(res.status).toBe(400);
      expect(res.body.detail).toMatch(/password/);
    }
    expect((await get(path)).body.name).toBe('Test User');
    expect(typesOf((await get(`/admin/events?user=${user.userId}`)).body)).toEqual(['user.created']);
    expect((await send('PATCH', path, { name: null })).body).toMatchObject({ name: null });
    expect((await send('PUT', '/admin/users/nobody%40example.test/password', { password: 'long enough password' })).status).toBe(404);
  });
});

describe('GET /admin/events/tail: the live tail', () => {
  it('answers as soon as a matching event commits, with a position from which nothing is seen twice; other types only move the position', async () => {
    const start = await get('/admin/events/tail?wait=0&type=user.created');
    expect(start.status).toBe(200);
    expect(start.body.items).toEqual([]);
    const asked = Date.now();
    const waiting = get(`/admin/events/tail?wait=20&type=user.created&position=${start.body.position}`);
    await new Promise((resolve) => setTimeout(resolve, 300));
    await seedClient(t, { name: 'Not a user' });
    const created = await send('POST', '/admin/users', { email: 'tailed@example.test', password: 'a long enough password' });
    expect(created.status).toBe(201);
    // The present is where every transaction older than the oldest still running has ended: while
    // another transaction runs on the server (another test's), a user.created committed just before
    // the start may come first. Each comes once; this one comes at the latest a few answers later.
    const seen: { event_id: string; type: string; user_id: string; actor: unknown }[] = [];
    let answer = await waiting;
    expect(Date.now() - asked).toBeLessThan(15_000);
    for (let round = 0; round < 10; round++) {
      seen.push(...answer.body.items);
      if (seen.some((e) => e.user_id === created.body.user_id)) break;
      answer = await get(`/admin/events/tail?wait=5&type=user.created&position=${answer.body.position}`);
    }
    expect(seen.map((e) => e.type)).toEqual(seen.map(() => 'user.created'));
    expect(new Set(seen.map((e) => e.event_id)).size).toBe(seen.length);
    expect(seen.filter((e) => e.user_id === created.body.user_id)).toEqual([
      expect.objectContaining({ actor: { kind: 'admin', via: 'token', address: '127.0.0.1' } }),
    ]);
    expect(answer.body.position).not.toBe(start.body.position);
    const again = await get(`/admin/events/tail?wait=0&type=user.created&position=${answer.body.position}`);
    expect(again.body.items.filter((e: { event_id: string }) => seen.some((s) => s.event_id === e.event_id))).toEqual([]);
  });

  it('without a position it starts at the present: nothing from before is sent', async () => {
    await seedUser(t);
    expect((await get('/admin/events/tail?wait=0')).body.items).toEqual([]);
  });

  it('a waiting tail answers at once when the admin API closes, so a shutdown never waits for it', async () => {
    const second = await buildAdminApp(t.deps, { listener: 'tcp', logger: pino({ level: 'silent' }) });
    await second.listen({ host: '127.0.0.1', port: 0 });
    const port = (second.server.address() as { port: number }).port;
    const waiting = fetch(`http://127.0.0.1:${port}/admin/events/tail?wait=25`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    await new Promise((resolve) => setTimeout(resolve, 500));
    const closing = Date.now();
    await second.close();
    expect(Date.now() - closing).toBeLessThan(10_000);
    expect((await waiting).status).toBe(200);
  });
});

describe('events outlive their user, until the retention purge', () => {
  it("a deleted user's events stay, by id and never by email, until EVENT_RETENTION_DAYS; then the purge removes them in bounded batches", async () => {
    const tv = await seedClient(t, { name: 'Retention TV' });
    const user = await seedUser(t);
    await signIn(t, tv, user.userId);
    expect((await send('DELETE', `/admin/users/${encodeURIComponent(user.email)}`)).status).toBe(200);
    const kept = await get(`/admin/events?user=${user.userId}`);
    expect(typesOf(kept.body)).toEqual(['user.created', 'device_request.approved', 'grant.issued', 'grant.revoked', 'user.deleted']);
    expect(JSON.stringify(kept.body)).not.toContain(user.email);
    expect((await get(`/admin/events?user=${encodeURIComponent(user.email)}`)).status).toBe(404);

    const options = { ...t.config.purge, batchSize: 3, maxBatches: 1000 };
    const count = async () =>
      Number(
        (
          await t.deps.db
            .selectFrom('events')
            .select((eb) => eb.fn.countAll().as('n'))
            .executeTakeFirstOrThrow()
        ).n,
      );
    const retention = t.config.purge.eventRetentionSeconds * 1000;
    const eventsBefore = await count();
    expect(eventsBefore).toBeGreaterThan(6);
    // A day short of the retention: nothing goes.
    expect((await purgeExpired(t.deps.db, new Date(Date.now() + retention - 86_400_000), options)).events).toBe(0);
    // Past it: a run deletes at most maxBatches × batchSize, and the next run goes on.
    const late = new Date(Date.now() + retention + 86_400_000);
    expect((await purgeExpired(t.deps.db, late, { ...options, maxBatches: 2 })).events).toBe(6);
    expect((await purgeExpired(t.deps.db, late, options)).events).toBeGreaterThanOrEqual(eventsBefore - 6);
    expect((await get(`/admin/events?user=${user.userId}`)).body.items).toEqual([]);
    expect(t.config.purge.eventRetentionSeconds).toBe(90 * 86400);
  });
});
