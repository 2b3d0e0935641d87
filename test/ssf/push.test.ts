import { sql } from 'kysely';
import { createRemoteJWKSet, jwtVerify } from 'jose';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { retryDelaySeconds } from '../../src/delivery/schedule.js';
import { seedUser, startTestApp, type TestApp } from '../helpers/app.js';
import { signedInBrowser } from '../helpers/browser.js';
import { type Receiver, type ReceivedDelivery, startReceiver } from '../helpers/receiver.js';
import { appToken, createStream, fanOutCommitted, PUSH, SESSION_REVOKED, seedReceiver, ssfCall, type TestReceiver, VERIFICATION } from '../helpers/ssf.js';
import { grantOf, revoke, signIn } from '../helpers/tokens.js';

/**
 * Issue 32 §3 and §4: push delivery (RFC 8935) through the outbound delivery engine, to a real
 * receiver on loopback (EVENTS_ALLOW_LOOPBACK) that verifies every SET against the transmitter's
 * JWKS, fetched over HTTP as a receiver fetches it (jose's createRemoteJWKSet).
 */

vi.setConfig({ testTimeout: 120_000, hookTimeout: 120_000 });

const ISSUER = 'http://localhost:3000';
const STREAM_UPDATED = 'https://schemas.openid.net/secevent/ssf/event-type/stream-updated';

let t: TestApp;
/** An app users sign in to, and a Shared Signals receiver. */
let tv: TestReceiver;
let jwks: ReturnType<typeof createRemoteJWKSet>;
const receivers: Receiver[] = [];

beforeAll(async () => {
  t = await startTestApp({ env: { EVENTS_ALLOW_LOOPBACK: 'true', EVENTS_RETRY_BASE_SECONDS: '5' } });
  tv = await seedReceiver(t, {
    kind: 'tv',
    name: 'Living Room TV',
    scopes: ['openid', 'offline_access', 'ssf.manage'],
    grantTypes: ['urn:ietf:params:oauth:grant-type:device_code', 'refresh_token', 'client_credentials'],
  });
  // The receiver fetches our keys as it would in production: over HTTP, from the jwks_uri.
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  jwks = createRemoteJWKSet(new URL(`http://127.0.0.1:${(t.app.server.address() as { port: number }).port}/.well-known/jwks.json`));
  await fanOutCommitted(t);
});
afterAll(async () => {
  await t?.close();
});
// Each test's streams go with it: a later test's SETs reach only its own receivers.
afterEach(async () => {
  await t.deps.deliveries.stop();
  // A test may have moved the clock past the token's life.
  tv.token = await appToken(t, tv, 'ssf.manage');
  for (const stream of (await ssfCall(t, tv.token, 'GET', '/ssf/stream')).json()) {
    await ssfCall(t, tv.token, 'DELETE', `/ssf/stream?stream_id=${stream.stream_id}`);
  }
  for (const receiver of receivers.splice(0)) await receiver.close();
});

/** A receiver on loopback that accepts SETs as RFC 8935 §2.2 says: 202. */
async function receiver(): Promise<Receiver> {
  const started = await startReceiver();
  started.answer = () => 202;
  receivers.push(started);
  return started;
}

/** What the receiver makes of a push: the SET verified against the JWKS (RFC 8417 and SSF 1.0 §4.1), its claims. */
async function verifiedSet(delivery: ReceivedDelivery) {
  expect(delivery.headers['content-type']).toBe('application/secevent+jwt');
  const { payload } = await jwtVerify(delivery.body, jwks, { issuer: ISSUER, audience: tv.clientId, typ: 'secevent+jwt', algorithms: ['RS256'] });
  expect(payload).not.toHaveProperty('sub');
  expect(payload).not.toHaveProperty('exp');
  return payload as Record<string, any>;
}

/** The fan-out and every delivery due now, under the test's clock. */
async function deliverNow() {
  await fanOutCommitted(t);
  await t.deps.deliveries.drain();
}

async function signOutOnDevicesPage(user: Awaited<ReturnType<typeof seedUser>>, grantId: string) {
  const browser = await signedInBrowser(t, user);
  expect((await browser.get('/account/devices')).statusCode).toBe(200);
  expect((await browser.post('/account/devices/sign-out', { grant_id: grantId })).statusCode).toBe(303);
}

async function device(user: Awaited<ReturnType<typeof seedUser>>) {
  const tokens = await signIn(t, tv, user.userId, 'openid offline_access');
  return { ...tokens, grantId: (await grantOf(t, tokens.access_token)).grant_id };
}

describe('a Devices-page sign-out reaches a push receiver', () => {
  it('within 2 s, as a SET it verifies against the JWKS, naming the session, with the Authorization header it asked for', async () => {
    const caep = await receiver();
    await createStream(t, tv, { delivery: { method: PUSH, endpoint_url: caep.url('/caep'), authorization_header: 'Bearer receiver-own-secret' } });
    const user = await seedUser(t);
    const { grantId } = await device(user);
    await fanOutCommitted(t);
    t.deps.deliveries.start();
    const browser = await signedInBrowser(t, user);
    expect((await browser.get('/account/devices')).statusCode).toBe(200);
    const signedOut = Date.now();
    expect((await browser.post('/account/devices/sign-out', { grant_id: grantId })).statusCode).toBe(303);
    const [delivery] = await caep.waitFor(1, 2000);
    expect(delivery!.at - signedOut).toBeLessThan(2000);
    expect(delivery!.path).toBe('/caep');
    expect(delivery!.headers.authorization).toBe('Bearer receiver-own-secret');
    const set = await verifiedSet(delivery!);
    expect(set).toMatchObject({
      iss: ISSUER,
      aud: tv.clientId,
      sub_id: { format: 'complex', user: { format: 'iss_sub', iss: ISSUER, sub: user.userId }, session: { format: 'opaque', id: grantId } },
      events: { [SESSION_REVOKED]: { initiating_entity: 'user' } },
    });
    // Nothing else: the sign-in's events are not Shared Signals.
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(caep.received).toHaveLength(1);
  });

  it('an /oauth/revoke reaches it the same way', async () => {
    const caep = await receiver();
    await createStream(t, tv, { delivery: { method: PUSH, endpoint_url: caep.url() } });
    const user = await seedUser(t);
    const tokens = await device(user);
    t.deps.deliveries.start();
    expect((await revoke(t, tv, tokens.refresh_token!)).statusCode).toBe(200);
    const [delivery] = await caep.waitFor(1, 2000);
    const set = await verifiedSet(delivery!);
    expect(set.sub_id.session.id).toBe(tokens.grantId);
    expect(set.events[SESSION_REVOKED].reason_admin.en).toBe('The app revoked the grant (RFC 7009)');
  });
});

describe('retries (RFC 8935 through the delivery engine)', () => {
  it('a receiver that answers 500 three times, then 202, gets the SET with the same jti every time', async () => {
    const caep = await receiver();
    caep.answer = (_request, index) => (index < 3 ? 500 : 202);
    await createStream(t, tv, { delivery: { method: PUSH, endpoint_url: caep.url() } });
    const user = await seedUser(t);
    const { grantId } = await device(user);
    await signOutOnDevicesPage(user, grantId);
    await deliverNow();
    for (let failure = 1; failure <= 3; failure++) {
      t.clock.advance(retryDelaySeconds(5, failure));
      await deliverNow();
    }
    expect(caep.received).toHaveLength(4);
    const sets = await Promise.all(caep.received.map(verifiedSet));
    expect(new Set(sets.map((set) => set.jti)).size).toBe(1);
    expect(sets[0]!.sub_id.session.id).toBe(grantId);
    const attempts = await t.deps.db.selectFrom('delivery_attempts').select('http_status').orderBy('attempt_id').execute();
    expect(attempts.slice(-4).map((attempt) => attempt.http_status)).toEqual([500, 500, 500, 202]);
  });
});

describe('the stream’s status and verification, pushed', () => {
  it('a verification SET is pushed at once with the receiver’s state', async () => {
    const caep = await receiver();
    const stream = await createStream(t, tv, { delivery: { method: PUSH, endpoint_url: caep.url() } });
    t.deps.deliveries.start();
    expect((await ssfCall(t, tv.token, 'POST', '/ssf/verify', { stream_id: stream.stream_id, state: 'are you there' })).statusCode).toBe(204);
    const [delivery] = await caep.waitFor(1, 2000);
    expect(await verifiedSet(delivery!)).toMatchObject({
      sub_id: { format: 'opaque', id: stream.stream_id },
      events: { [VERIFICATION]: { state: 'are you there' } },
    });
  });

  it('paused, nothing is pushed and everything is held; enabled, it all arrives; disabled, what was held is dropped', async () => {
    const caep = await receiver();
    const stream = await createStream(t, tv, { delivery: { method: PUSH, endpoint_url: caep.url() } });
    const status = (value: string) => ssfCall(t, tv.token, 'POST', '/ssf/status', { stream_id: stream.stream_id, status: value });
    const user = await seedUser(t);
    const held = await device(user);
    const dropped = await device(user);
    const browser = await signedInBrowser(t, user);
    await browser.get('/account/devices');

    expect((await status('paused')).statusCode).toBe(200);
    await browser.post('/account/devices/sign-out', { grant_id: held.grantId });
    await deliverNow();
    expect(caep.received).toEqual([]);
    await status('enabled');
    await deliverNow();
    expect((await Promise.all(caep.received.map(verifiedSet))).map((set) => set.sub_id.session.id)).toEqual([held.grantId]);

    await status('paused');
    await browser.post('/account/devices/sign-out', { grant_id: dropped.grantId });
    await deliverNow();
    await status('disabled');
    await status('enabled');
    await deliverNow();
    expect(caep.received).toHaveLength(1);
  });

  it('a receiver that keeps failing is paused by the engine, its status says so until the receiver enables it again, and it then gets a stream-updated SET (SSF 1.0 §8.1.5) with what it missed', async () => {
    const caep = await receiver();
    caep.answer = () => 503;
    const stream = await createStream(t, tv, { delivery: { method: PUSH, endpoint_url: caep.url() } });
    const user = await seedUser(t);
    const grant = await device(user);
    const browser = await signedInBrowser(t, user);
    await browser.get('/account/devices');
    await browser.post('/account/devices/sign-out', { grant_id: grant.grantId });
    await deliverNow();
    // EVENTS_PAUSE_AFTER_HOURS (12) of failures, retried an hour apart at the most.
    for (let hour = 0; hour < 14; hour++) {
      t.clock.advance(3600);
      await deliverNow();
    }
    tv.token = await appToken(t, tv, 'ssf.manage');
    const read = await ssfCall(t, tv.token, 'GET', `/ssf/status?stream_id=${stream.stream_id}`);
    expect(read.json()).toMatchObject({ stream_id: stream.stream_id, status: 'paused', reason: expect.stringContaining('kept failing') });
    const paused = await sql<{ reason: string; actor: unknown }>`
      SELECT reason, actor FROM events WHERE type = 'ssf_stream.changed' AND data->>'stream_id' = ${stream.stream_id} AND reason = 'paused_failing'`.execute(
      t.deps.db,
    );
    expect(paused.rows).toEqual([{ reason: 'paused_failing', actor: { kind: 'server' } }]);
    const tries = caep.received.length;

    // Nothing more was tried while paused, the stream-updated SET included.
    t.clock.advance(3600);
    await deliverNow();
    expect(caep.received.length).toBe(tries);

    caep.answer = () => 202;
    tv.token = await appToken(t, tv, 'ssf.manage');
    expect((await ssfCall(t, tv.token, 'POST', '/ssf/status', { stream_id: stream.stream_id, status: 'enabled' })).statusCode).toBe(200);
    await deliverNow();
    expect(caep.received.length).toBe(tries + 2);
    const sets = await Promise.all(caep.received.slice(tries).map(verifiedSet));
    const revoked = sets.find((set) => SESSION_REVOKED in set.events);
    expect(revoked?.sub_id.session.id).toBe(grant.grantId);
    const updated = sets.find((set) => STREAM_UPDATED in set.events);
    expect(updated).toMatchObject({ aud: tv.clientId, sub_id: { format: 'opaque', id: stream.stream_id } });
    expect(updated?.events[STREAM_UPDATED]).toEqual({ status: 'paused', reason: expect.stringContaining('kept failing') });
    expect(updated?.events[STREAM_UPDATED].reason).toBe(read.json().reason);
    expect((await ssfCall(t, tv.token, 'GET', `/ssf/status?stream_id=${stream.stream_id}`)).json()).toEqual({ stream_id: stream.stream_id, status: 'enabled' });
  });
});

describe('SSRF at delivery', () => {
  it('a name that resolves to a private address is never connected to: the attempt is refused as not public', async () => {
    const rebinding = await startTestApp({
      env: { EVENTS_ALLOW_LOOPBACK: 'true' },
      outbound: { resolve: async () => [{ address: '10.0.0.7', family: 4 }] },
    });
    try {
      const app = await seedReceiver(rebinding, {
        kind: 'tv',
        scopes: ['openid', 'offline_access', 'ssf.manage'],
        grantTypes: ['urn:ietf:params:oauth:grant-type:device_code', 'refresh_token', 'client_credentials'],
      });
      await fanOutCommitted(rebinding);
      await createStream(rebinding, app, { delivery: { method: PUSH, endpoint_url: 'https://receiver.example/caep' } });
      const user = await seedUser(rebinding);
      const tokens = await signIn(rebinding, app, user.userId, 'openid offline_access');
      await revoke(rebinding, app, tokens.refresh_token!);
      await fanOutCommitted(rebinding);
      await rebinding.deps.deliveries.drain();
      const attempts = await rebinding.deps.db.selectFrom('delivery_attempts').select(['http_status', 'error']).execute();
      expect(attempts).toEqual([{ http_status: null, error: 'not_public' }]);
    } finally {
      await rebinding.close();
    }
  });
});
