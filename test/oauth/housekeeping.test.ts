import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { purgeExpired, type PurgeOptions } from '../../src/housekeeping/purge.js';
import { signedInBrowser } from '../helpers/browser.js';
import { revokeGrants } from '../../src/oauth/grant-revocation.js';
import { deleteEndedGrants } from '../../src/repositories/purge.js';
import { deleteStaleRateLimitCounters } from '../../src/repositories/rate-limits.js';
import { seedClient, seedUser, startTestApp, type TestApp } from '../helpers/app.js';
import { holdLocks } from '../helpers/lock-holder.js';
import { decide, poll, startDeviceFlow } from '../helpers/device.js';
import { grantOf, refresh, refreshed, rotatedGrant } from '../helpers/tokens.js';
import { createStream, seedReceiver, ssfCall } from '../helpers/ssf.js';

let t: TestApp;
let clientId: string;
let user: { userId: string; email: string; password: string };

const options: PurgeOptions = {
  batchSize: 2,
  maxBatches: 100,
  grantRetentionSeconds: 86400,
  eventRetentionSeconds: 90 * 86400,
  deviceRequestRetentionSeconds: 3600,
  unusedIconRetentionSeconds: 3600,
  deliveryRetentionSeconds: 86400,
  securityEventTokenRetentionSeconds: 7 * 86400,
};

const count = async (table: 'device_requests' | 'browser_sessions' | 'access_tokens' | 'grants' | 'refresh_tokens' | 'events') =>
  Number(
    (
      await t.deps.db
        .selectFrom(table)
        .select((eb) => eb.fn.countAll().as('n'))
        .executeTakeFirstOrThrow()
    ).n,
  );

async function signedInDevice() {
  const flow = await startDeviceFlow(t, clientId);
  await decide(t, flow.user_code, user.userId, 'approve');
  t.clock.advance(5);
  return (await poll(t, clientId, flow.device_code)).json();
}

beforeAll(async () => {
  t = await startTestApp();
  ({ clientId } = await seedClient(t));
  user = await seedUser(t);
});
afterAll(() => t.close());

describe('purge of expired state', () => {
  it('deletes device requests an hour after they expired, in batches, and keeps live ones', async () => {
    for (let i = 0; i < 5; i++) await startDeviceFlow(t, clientId);
    t.clock.advance(600 + 3600 + 1);
    const live = await startDeviceFlow(t, clientId);
    const before = await count('device_requests');
    const purged = await purgeExpired(t.deps.db, t.clock.now(), options);
    expect(purged.deviceRequests).toBe(before - 1);
    expect(await count('device_requests')).toBe(1);
    // Issue 32 §1: each request that ended undecided is recorded as expired when it goes.
    const expired = await t.deps.db.selectFrom('events').select(['client_id', 'data']).where('type', '=', 'device_request.expired').execute();
    expect(expired).toHaveLength(before - 1);
    for (const event of expired) expect(event).toMatchObject({ client_id: clientId, data: { status: 'pending', request_id: expect.any(String) } });
    // The live request still works.
    t.clock.advance(5);
    expect((await poll(t, clientId, live.device_code)).json().error).toBe('authorization_pending');
  });

  it('a run is bounded: maxBatches × batchSize rows at the most', async () => {
    for (let i = 0; i < 5; i++) await startDeviceFlow(t, clientId);
    t.clock.advance(600 + 3600 + 1);
    const purged = await purgeExpired(t.deps.db, t.clock.now(), { ...options, batchSize: 1, maxBatches: 2 });
    expect(purged.deviceRequests).toBe(2);
    await purgeExpired(t.deps.db, t.clock.now(), options);
  });

  it('deletes expired browser sessions and expired access tokens', async () => {
    await signedInBrowser(t, user);
    const tokens = await signedInDevice();
    t.clock.advance(t.config.sessionTtl + 1);
    const purged = await purgeExpired(t.deps.db, t.clock.now(), options);
    expect(purged.browserSessions).toBeGreaterThanOrEqual(1);
    expect(purged.accessTokens).toBeGreaterThanOrEqual(1);
    expect(await count('browser_sessions')).toBe(0);
    expect(await count('access_tokens')).toBe(0);
    // The grant itself lives on: its refresh token is untouched.
    expect(tokens.refresh_token).toBeDefined();
    expect(await count('refresh_tokens')).toBeGreaterThanOrEqual(1);
  });

  it("deletes expired apps' own tokens (client_credentials) with the users' ones, and Shared Signals SETs a week old", async () => {
    const receiver = await seedReceiver(t);
    const stream = await createStream(t, receiver);
    expect((await ssfCall(t, receiver.token, 'POST', '/ssf/verify', { stream_id: stream.stream_id })).statusCode).toBe(204);
    t.clock.advance(t.config.accessTokenTtl + 1);
    const kept = await purgeExpired(t.deps.db, t.clock.now(), options);
    expect(kept.accessTokens).toBeGreaterThanOrEqual(1);
    expect(kept.securityEventTokens).toBe(0);
    expect(await t.deps.db.selectFrom('app_access_tokens').selectAll().execute()).toEqual([]);
    expect(await t.deps.db.selectFrom('ssf_sets').select('jti').execute()).toHaveLength(1);
    t.clock.advance(7 * 86400);
    expect((await purgeExpired(t.deps.db, t.clock.now(), options)).securityEventTokens).toBe(1);
    expect(await t.deps.db.selectFrom('ssf_sets').select('jti').execute()).toEqual([]);
  });

  it('keeps the replaced refresh tokens of a live grant, so a replay after a purge is still caught', async () => {
    const client = { clientId, clientSecret: null };
    const grant = await rotatedGrant(t, client, user.userId);
    // Past the first token's own expiry, but the grant lives on through its rotation.
    t.clock.advance(3600 * 24);
    const next = await refreshed(t, client, grant.second.refresh_token!);
    t.clock.advance(t.config.refreshTokenTtl - 3600);
    await purgeExpired(t.deps.db, t.clock.now(), options);
    const replay = await refresh(t, client, grant.first.refresh_token!);
    expect(replay.json().error).toBe('invalid_grant');
    expect((await grantOf(t, next.refresh_token!)).revoked_reason).toBe('reuse_detected');
  });

  it('keeps a revoked grant for LINK_RETENTION, then deletes it with its tokens and events', async () => {
    await signedInDevice();
    const grants = await count('grants');
    await t.deps.db.transaction().execute((trx) => revokeGrants(trx, { userId: user.userId }, 'signed_out_by_user', { now: t.clock.now(), ip: null }));
    expect((await purgeExpired(t.deps.db, t.clock.now(), options)).grants).toBe(0);
    t.clock.advance(86400 + 1);
    expect((await purgeExpired(t.deps.db, t.clock.now(), options)).grants).toBe(grants);
    expect(await count('grants')).toBe(0);
    expect(await count('refresh_tokens')).toBe(0);
    // Issue 32 §1: the event log outlives the grant (until EVENT_RETENTION_DAYS).
    expect(await count('events')).toBeGreaterThan(0);
  });
});

describe('a purge racing a write', () => {
  /**
   * The purge picks stale rows from its snapshot; a counter renewed into a new window meanwhile
   * must survive. On PostgreSQL another connection renews it while holding its row lock, so the
   * DELETE waits and then sees the renewed row. The embedded database has one connection.
   */
  it.skipIf(!process.env.TEST_DATABASE_URL)('a rate limit counter renewed while the purge waits on it is not deleted', async () => {
    const now = t.clock.now();
    const stale = new Date(now.getTime() - 2 * 86_400_000);
    await t.deps.db.insertInto('rate_limit_counters').values({ key: 'purge-race', window_start: stale, hits: 7 }).execute();
    const holder = await holdLocks(t.database.url!);
    await holder.query("UPDATE rate_limit_counters SET window_start = $1, hits = 1 WHERE key = 'purge-race'", [now]);
    const purging = deleteStaleRateLimitCounters(t.deps.db, new Date(now.getTime() - 86_400_000), 10);
    await holder.commitWhenWaiting(1);
    expect(await purging).toBe(0);
    const kept = await t.deps.db.selectFrom('rate_limit_counters').select('hits').where('key', '=', 'purge-race').executeTakeFirst();
    expect(kept).toEqual({ hits: 1 });
  });

  /**
   * A grant's rows have no foreign key to it (migration 2026-11-23T13-00-00); a trigger
   * deletes them with it. A writer (here as a revocation writes: the grant, then its event) holds
   * the grant's lock; the purge's DELETE waits for it, and the trigger's statements, each with a
   * snapshot of its own, then see the rows the writer committed.
   */
  it.skipIf(!process.env.TEST_DATABASE_URL)('rows written to an ended grant while the purge waits on its lock are deleted with it', async () => {
    const tokens = await signedInDevice();
    const grant = await grantOf(t, tokens.access_token);
    t.clock.advance(t.config.refreshTokenTtl + 1);
    const holder = await holdLocks(t.database.url!);
    await holder.query('UPDATE grants SET last_used_at = last_used_at WHERE grant_id = $1', [grant.grant_id]);
    await holder.query(
      `INSERT INTO events (grant_id, user_id, client_id, type, reason, created_at) VALUES ($1, $2, $3, 'grant.revoked', 'signed_out_by_user', now())`,
      [grant.grant_id, grant.user_id, grant.client_id],
    );
    await holder.query(
      `INSERT INTO access_tokens (token_hash, grant_id, user_id, client_id, scopes, created_at, expires_at)
       VALUES (sha256('purge-race'), $1, $2, $3, '{profile}', now(), now() + interval '1 hour')`,
      [grant.grant_id, grant.user_id, grant.client_id],
    );
    const purging = deleteEndedGrants(t.deps.db, t.clock.now(), 10);
    await holder.commitWhenWaiting(1);
    expect(await purging).toBeGreaterThanOrEqual(1);
    for (const table of ['grants', 'refresh_tokens', 'access_tokens'] as const) {
      const left = await t.deps.db.selectFrom(table).select('grant_id').where('grant_id', '=', grant.grant_id).execute();
      expect(left, table).toEqual([]);
    }
  });
});
