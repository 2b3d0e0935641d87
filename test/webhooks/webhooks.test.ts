import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { sql } from 'kysely';
import { Webhook } from 'standardwebhooks';
import { retryDelaySeconds } from '../../src/delivery/schedule.js';
import { recordEvents } from '../../src/events/event-log.js';
import { seedClient, seedUser, startTestApp, type TestApp } from '../helpers/app.js';
import { signedInBrowser } from '../helpers/browser.js';
import { type Receiver, startReceiver } from '../helpers/receiver.js';
import { grantOf, signIn } from '../helpers/tokens.js';
import { ADMIN_TOKEN, type AdminApi, drainWebhooks, startAdminApi, verified } from './helpers.js';

/**
 * Issue 32 §2: signed webhooks, end to end. Real receivers on loopback (EVENTS_ALLOW_LOOPBACK)
 * verify every delivery with the `standardwebhooks` package; endpoints are registered through
 * the admin API over HTTP; the engine runs as the server runs it, or is stepped under the test's
 * clock.
 */

vi.setConfig({ testTimeout: 120_000, hookTimeout: 120_000 });

let t: TestApp;
let admin: AdminApi;
const receivers: Receiver[] = [];
beforeAll(async () => {
  t = await startTestApp({ env: { EVENTS_ALLOW_LOOPBACK: 'true', ADMIN_TOKEN, EVENTS_RETRY_BASE_SECONDS: '5' } });
  admin = await startAdminApi(t.deps);
});
afterAll(async () => {
  await admin?.close();
  await t?.close();
});
// Each test's endpoints go with it: a later test's events reach only its own receivers.
afterEach(async () => {
  await t.deps.deliveries.stop();
  for (const hook of (await admin.call('GET', '/admin/webhooks?limit=500')).body.items) await admin.call('DELETE', `/admin/webhooks/${hook.id}`);
  for (const receiver of receivers.splice(0)) await receiver.close();
});

async function receiver(): Promise<Receiver> {
  const started = await startReceiver();
  receivers.push(started);
  return started;
}

/** Registers an endpoint for `events` (every type when left out); its id and secret. */
async function register(url: string, events?: string[]): Promise<{ id: string; secret: string }> {
  const res = await admin.call('POST', '/admin/webhooks', { url, ...(events && { events }) });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body;
}

/** The fan-out and every delivery due now, as many rounds as it takes. */
const deliverNow = () => drainWebhooks(t);

const grantEvents = (grantId: string, count: number, from = 0) =>
  recordEvents(
    t.deps.db,
    Array.from({ length: count }, (_, i) => ({ type: 'grant.rotated' as const, grant_id: grantId, reason: `n${from + i}`, created_at: t.clock.now() })),
  );

describe('the signature', () => {
  // First, while the test's clock is this machine's: the package's verify refuses a timestamp five minutes off.
  it('fails verification with another secret or an altered body', async () => {
    const hooks = await receiver();
    const { secret } = await register(hooks.url(), ['grant.rotated']);
    await grantEvents('00000000-0000-4000-8000-00000000e000', 1);
    await deliverNow();
    const [delivery] = hooks.received;
    const headers = {
      'webhook-id': String(delivery!.headers['webhook-id']),
      'webhook-timestamp': String(delivery!.headers['webhook-timestamp']),
      'webhook-signature': String(delivery!.headers['webhook-signature']),
    };
    expect(() => new Webhook(secret).verify(delivery!.body, headers)).not.toThrow();
    expect(() => new Webhook(`whsec_${Buffer.alloc(32, 9).toString('base64')}`).verify(delivery!.body, headers)).toThrow();
    expect(() => new Webhook(secret).verify(delivery!.body.replace('n0', 'n1'), headers)).toThrow();
  });
});

describe('without an endpoint', () => {
  it('the fan-out reads nothing and its cursor waits; the first endpoint gets the events from its registration on, none from before', async () => {
    const cursor = async () =>
      (await sql<{ at: string }>`SELECT transaction_id::text || '/' || event_id::text AS at FROM event_cursors WHERE consumer = 'webhooks'`.execute(t.deps.db))
        .rows[0]?.at ?? null;
    await grantEvents('00000000-0000-4000-8000-00000000e100', 1);
    await deliverNow();
    const waiting = await cursor();
    await grantEvents('00000000-0000-4000-8000-00000000e100', 50, 1);
    await deliverNow();
    expect(await cursor()).toBe(waiting);

    const hooks = await receiver();
    await register(hooks.url(), ['grant.rotated']);
    await grantEvents('00000000-0000-4000-8000-00000000e100', 1, 100);
    await deliverNow();
    expect(hooks.received.map((delivery) => JSON.parse(delivery.body).data.reason)).toEqual(['n100']);
  });
});

describe('a Devices-page sign-out reaches a webhook receiver', () => {
  it('within 2 s, signed as Standard Webhooks says, with its reason and the subject, never an email', async () => {
    const hooks = await receiver();
    const { secret } = await register(hooks.url(), ['grant.revoked']);
    const tv = await seedClient(t, { kind: 'tv' });
    const user = await seedUser(t);
    const tokens = await signIn(t, tv, user.userId);
    const { grant_id } = await grantOf(t, tokens.access_token);
    t.deps.deliveries.start();
    const browser = await signedInBrowser(t, user);
    expect((await browser.get('/account/devices')).statusCode).toBe(200);
    const signedOut = Date.now();
    expect((await browser.post('/account/devices/sign-out', { grant_id })).statusCode).toBe(303);
    const [delivery] = await hooks.waitFor(1, 2000);
    expect(delivery!.at - signedOut).toBeLessThan(2000);
    const payload = verified(delivery!, secret);
    expect(payload).toMatchObject({ type: 'grant.revoked', data: { grant_id, user_id: user.userId, client_id: tv.clientId, reason: 'signed_out_by_user' } });
    expect(Date.parse(payload.timestamp)).not.toBeNaN();
    expect(delivery!.body).not.toContain(user.email);
    expect(delivery!.headers['webhook-id']).toMatch(/^msg_/);
    expect(delivery!.headers['content-type']).toBe('application/json');
    // Only the type it asked for: the sign-in's grant.issued and the page's session events were not sent.
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(hooks.received).toHaveLength(1);
  });
});

describe('retries', () => {
  it('a receiver that answers 500 three times, then 200, gets the event with the same webhook-id, and the delivery log shows each attempt', async () => {
    const hooks = await receiver();
    hooks.answer = (_request, index) => (index < 3 ? 500 : 200);
    const { id, secret } = await register(hooks.url(), ['grant.revoked']);
    const tv = await seedClient(t, { kind: 'tv' });
    const user = await seedUser(t);
    const { grant_id } = await grantOf(t, (await signIn(t, tv, user.userId)).access_token);
    // An operator's revocation through the admin API.
    expect((await admin.call('DELETE', `/admin/users/${encodeURIComponent(user.email)}/devices/${grant_id}`)).status).toBe(200);
    await deliverNow();
    for (let failure = 1; failure <= 3; failure++) {
      t.clock.advance(retryDelaySeconds(5, failure));
      await deliverNow();
    }
    expect(hooks.received).toHaveLength(4);
    expect(new Set(hooks.received.map((r) => r.headers['webhook-id'])).size).toBe(1);
    for (const delivery of hooks.received) expect(verified(delivery, secret)).toMatchObject({ type: 'grant.revoked', data: { grant_id } });
    const log = await admin.call('GET', `/admin/webhooks/${id}/deliveries`);
    expect(log.status).toBe(200);
    expect(log.body.items.map((a: { http_status: number }) => a.http_status)).toEqual([500, 500, 500, 200]);
    expect(
      log.body.items.every(
        (a: { message_id: string; message_state: string }) => a.message_id === hooks.received[0]!.headers['webhook-id'] && a.message_state === 'delivered',
      ),
    ).toBe(true);
  });

  it('a message whose event was purged while it waited is given up with event_purged, and the next of its grant goes on', async () => {
    const hooks = await receiver();
    hooks.answer = (_request, index) => (index === 0 ? 500 : 200);
    const { id, secret } = await register(hooks.url(), ['grant.rotated']);
    const grantId = '00000000-0000-4000-8000-00000000e200';
    await grantEvents(grantId, 2);
    await deliverNow();
    expect(hooks.received).toHaveLength(1);
    // The purge removes the first event (past EVENT_RETENTION_DAYS) while its message waits for its retry.
    await sql`DELETE FROM events WHERE grant_id = ${grantId} AND reason = 'n0'`.execute(t.deps.db);
    t.clock.advance(retryDelaySeconds(5, 1));
    await deliverNow();
    expect(hooks.received.slice(1).map((delivery) => verified(delivery, secret).data.reason)).toEqual(['n1']);
    const log = await admin.call('GET', `/admin/webhooks/${id}/deliveries`);
    expect(
      log.body.items.map((a: { http_status: number | null; error: string | null; message_state: string }) => [a.http_status, a.error, a.message_state]),
    ).toEqual([
      [500, null, 'gave_up'],
      [null, 'event_purged', 'gave_up'],
      [200, null, 'delivered'],
    ]);
  });

  it('1,000 events of one grant, with the receiver down for an hour, arrive in order afterwards, each retry with its first webhook-id', async () => {
    const hooks = await receiver();
    let down = true;
    hooks.answer = () => (down ? 503 : 200);
    const { secret } = await register(hooks.url(), ['grant.rotated']);
    await grantEvents('00000000-0000-4000-8000-00000000a000', 1000);
    for (let minute = 0; minute < 60; minute += 5) {
      await deliverNow();
      t.clock.advance(300);
    }
    const whileDown = hooks.received.length;
    expect(whileDown).toBeGreaterThan(1);
    down = false;
    t.clock.advance(3600);
    await deliverNow();
    const after = hooks.received.slice(whileDown).map((delivery) => verified(delivery, secret));
    expect(after.map((p) => p.data.reason)).toEqual(Array.from({ length: 1000 }, (_, i) => `n${i}`));
    // The first event was tried while the receiver was down: the same id then and now.
    expect(hooks.received[whileDown]!.headers['webhook-id']).toBe(hooks.received[0]!.headers['webhook-id']);
    expect(new Set(hooks.received.slice(whileDown).map((d) => d.headers['webhook-id'])).size).toBe(1000);
  });

  it('an endpoint failing for hours is paused, its backlog kept; resume through the admin API delivers it in order', async () => {
    const hooks = await receiver();
    let down = true;
    hooks.answer = () => (down ? 500 : 200);
    const { id } = await register(hooks.url(), ['grant.rotated']);
    await grantEvents('00000000-0000-4000-8000-00000000b000', 10);
    let view = (await admin.call('GET', `/admin/webhooks/${id}`)).body;
    for (let step = 0; step < 60 && view.status === 'active'; step++) {
      await deliverNow();
      t.clock.advance(900);
      view = (await admin.call('GET', `/admin/webhooks/${id}`)).body;
    }
    expect(view).toMatchObject({ status: 'paused', paused_reason: 'failing', pending: 10 });
    expect(Date.parse(view.paused_at) - Date.parse(view.failing_since)).toBeGreaterThanOrEqual(12 * 3600_000);
    // The operator hears of it in the event log (and by any other endpoint that takes webhook.changed).
    const pausedEvents = await admin.call('GET', '/admin/events?type=webhook.changed');
    expect(pausedEvents.body.items.filter((e: { data: { webhook_id?: string } }) => e.data.webhook_id === id)).toEqual([
      expect.objectContaining({ reason: 'paused_failing', actor: { kind: 'server' }, data: expect.objectContaining({ failing_since: view.failing_since }) }),
    ]);
    // Kept: what happens meanwhile is queued, nothing is sent.
    await grantEvents('00000000-0000-4000-8000-00000000b000', 2, 10);
    const before = hooks.received.length;
    t.clock.advance(86400);
    await deliverNow();
    expect(hooks.received).toHaveLength(before);
    expect((await admin.call('GET', `/admin/webhooks/${id}`)).body.pending).toBe(12);
    down = false;
    const resumed = await admin.call('POST', `/admin/webhooks/${id}/resume`);
    expect(resumed.body).toMatchObject({ status: 'active', paused_reason: null, failing_since: null });
    await deliverNow();
    expect(hooks.received.slice(before).map((d) => (JSON.parse(d.body) as { data: { reason: string } }).data.reason)).toEqual(
      Array.from({ length: 12 }, (_, i) => `n${i}`),
    );
  });
});

describe('every instance delivers, each event once', () => {
  it('two apps on one database, both running their loops, deliver 200 events once each, every grant in order', async () => {
    const hooks = await receiver();
    const { secret } = await register(hooks.url(), ['grant.rotated']);
    const second = await startTestApp({ database: t.database, env: { EVENTS_ALLOW_LOOPBACK: 'true' } });
    // Instances share the time: a claim is judged by the claimer's clock and the others'.
    second.clock.advance((t.clock.now().getTime() - second.clock.now().getTime()) / 1000);
    try {
      t.deps.deliveries.start();
      second.deps.deliveries.start();
      for (let grant = 0; grant < 10; grant++) await grantEvents(`00000000-0000-4000-8000-0000000c00${grant}0`, 20);
      await hooks.waitFor(200, 20_000);
      await new Promise((resolve) => setTimeout(resolve, 500));
    } finally {
      await second.close();
    }
    const payloads = hooks.received.map((d) => verified(d, secret));
    expect(payloads).toHaveLength(200);
    expect(new Set(hooks.received.map((d) => d.headers['webhook-id'])).size).toBe(200);
    for (let grant = 0; grant < 10; grant++) {
      const id = `00000000-0000-4000-8000-0000000c00${grant}0`;
      expect(payloads.filter((p) => p.data.grant_id === id).map((p) => p.data.reason)).toEqual(Array.from({ length: 20 }, (_, i) => `n${i}`));
    }
  });
});

describe('a slow receiver', () => {
  it('holds back neither a token request nor another endpoint', async () => {
    const slow = await receiver();
    slow.answer = () => 'hang';
    const fast = await receiver();
    await register(slow.url(), ['grant.rotated']);
    await register(fast.url(), ['grant.rotated']);
    t.deps.deliveries.start();
    await grantEvents('00000000-0000-4000-8000-00000000d000', 5);
    await fast.waitFor(5, 2000);
    await slow.waitFor(1, 2000);
    // A token request meanwhile answers as fast as ever.
    const tv = await seedClient(t, { kind: 'tv' });
    const started = Date.now();
    const flow = await t.app.inject({
      method: 'POST',
      url: '/oauth/device/code',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      payload: `client_id=${tv.clientId}`,
    });
    expect(flow.statusCode).toBe(200);
    expect(Date.now() - started).toBeLessThan(1000);
    expect(slow.open).toBe(1);
  });
});
