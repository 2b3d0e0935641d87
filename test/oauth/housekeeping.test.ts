import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { purgeExpired, type PurgeOptions } from '../../src/oauth/housekeeping.js';
import { signedInBrowser } from '../helpers/browser.js';
import { revokeChains } from '../../src/oauth/chains.js';
import { deleteEndedLinks } from '../../src/repositories/purge.js';
import { deleteStaleRateLimitCounters } from '../../src/repositories/rate-limits.js';
import { seedClient, seedUser, startTestApp, type TestApp } from '../helpers/app.js';
import { holdLocks } from '../helpers/lock-holder.js';
import { decide, poll, startDeviceFlow } from '../helpers/device.js';
import { linkOf, refresh, refreshed, rotatedChain } from '../helpers/tokens.js';

let t: TestApp;
let clientId: string;
let user: { userId: string; email: string; password: string };

const options: PurgeOptions = {
  batchSize: 2,
  maxBatches: 100,
  linkRetentionSeconds: 86400,
  deviceRequestRetentionSeconds: 3600,
  unusedIconRetentionSeconds: 3600,
};

const count = async (table: 'device_requests' | 'browser_sessions' | 'access_tokens' | 'device_links' | 'refresh_tokens' | 'link_events') =>
  Number((await t.deps.db.selectFrom(table).select((eb) => eb.fn.countAll().as('n')).executeTakeFirstOrThrow()).n);

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
    // The chain itself lives on: its refresh token is untouched.
    expect(tokens.refresh_token).toBeDefined();
    expect(await count('refresh_tokens')).toBeGreaterThanOrEqual(1);
  });

  it('keeps the replaced refresh tokens of a live chain, so a replay after a purge is still caught', async () => {
    const client = { clientId, clientSecret: null };
    const chain = await rotatedChain(t, client, user.userId);
    // Past the first token's own expiry, but the chain lives on through its rotation.
    t.clock.advance(3600 * 24);
    const next = await refreshed(t, client, chain.second.refresh_token!);
    t.clock.advance(t.config.refreshTokenTtl - 3600);
    await purgeExpired(t.deps.db, t.clock.now(), options);
    const replay = await refresh(t, client, chain.first.refresh_token!);
    expect(replay.json().error).toBe('invalid_grant');
    expect((await linkOf(t, next.refresh_token!)).revoked_reason).toBe('reuse_detected');
  });

  it('keeps a revoked chain for LINK_RETENTION, then deletes it with its tokens and events', async () => {
    await signedInDevice();
    const links = await count('device_links');
    await t.deps.db.transaction().execute((trx) => revokeChains(trx, { userId: user.userId }, 'signed_out_by_user', { now: t.clock.now(), ip: null }));
    expect((await purgeExpired(t.deps.db, t.clock.now(), options)).links).toBe(0);
    t.clock.advance(86400 + 1);
    expect((await purgeExpired(t.deps.db, t.clock.now(), options)).links).toBe(links);
    expect(await count('device_links')).toBe(0);
    expect(await count('refresh_tokens')).toBe(0);
    expect(await count('link_events')).toBe(0);
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
   * A chain's rows have no foreign key to its link (migration 2026-11-23T13-00-00); a trigger
   * deletes them with it. A writer (here as a revocation writes: the link, then its event) holds
   * the link's lock; the purge's DELETE waits for it, and the trigger's statements, each with a
   * snapshot of its own, then see the rows the writer committed.
   */
  it.skipIf(!process.env.TEST_DATABASE_URL)('rows written to an ended chain while the purge waits on its link are deleted with it', async () => {
    const tokens = await signedInDevice();
    const link = await linkOf(t, tokens.access_token);
    t.clock.advance(t.config.refreshTokenTtl + 1);
    const holder = await holdLocks(t.database.url!);
    await holder.query('UPDATE device_links SET last_used_at = last_used_at WHERE link_id = $1', [link.link_id]);
    await holder.query(
      `INSERT INTO link_events (link_id, user_id, client_id, event, reason, created_at) VALUES ($1, $2, $3, 'revoked', 'signed_out_by_user', now())`,
      [link.link_id, link.user_id, link.client_id],
    );
    await holder.query(
      `INSERT INTO access_tokens (token_hash, link_id, user_id, client_id, scopes, created_at, expires_at)
       VALUES (sha256('purge-race'), $1, $2, $3, '{profile}', now(), now() + interval '1 hour')`,
      [link.link_id, link.user_id, link.client_id],
    );
    const purging = deleteEndedLinks(t.deps.db, t.clock.now(), 10);
    await holder.commitWhenWaiting(1);
    expect(await purging).toBeGreaterThanOrEqual(1);
    for (const table of ['device_links', 'refresh_tokens', 'access_tokens', 'link_events'] as const) {
      const left = await t.deps.db.selectFrom(table).select('link_id').where('link_id', '=', link.link_id).execute();
      expect(left, table).toEqual([]);
    }
  });
});
