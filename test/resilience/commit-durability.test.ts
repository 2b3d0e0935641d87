import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DeviceAuthorizationResponse } from '../../src/oauth/device/authorization.js';
import { recordDevicePoll } from '../../src/oauth/grant-types/device-code.js';
import { seedClient, seedUser, startTestApp, type TestApp } from '../helpers/app.js';
import { decide, DEVICE_GRANT } from '../helpers/device.js';
import { createClusterDatabase, POSTGRES_BIN, postgresBinariesPresent } from '../helpers/throwaway-cluster.js';
import { send, type WebResponse } from '../helpers/web.js';

/**
 * Which commits wait until they are durable. The test's own cluster is told that every
 * synchronous commit must reach a standby named `never_connects`, which never connects: such a
 * commit then waits (wait event SyncRep) until the requirement is lifted. A commit made with
 * synchronous_commit off does not wait.
 *
 * A poll records only when the device last polled and its interval, and commits asynchronously
 * (src/db/asynchronous-commit.ts); the writes a crash must not lose (a code's issue, the
 * redemption that hands out tokens) still wait.
 *
 * Needs the PostgreSQL 15 server programs; skipped only when initdb is not installed.
 */

const WAIT_BOUND_MS = 10_000;

let database: Awaited<ReturnType<typeof createClusterDatabase>>;
let t: TestApp;
let admin: pg.Client;
let server: string;

/** Backends of the cluster waiting for a standby's confirmation of their commit. */
async function syncRepWaiters(): Promise<number> {
  const result = await admin.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event = 'SyncRep'`);
  return result.rows[0]!.n;
}

async function waitForSyncRepWaiters(n: number): Promise<void> {
  const deadline = Date.now() + WAIT_BOUND_MS;
  while ((await syncRepWaiters()) < n) {
    if (Date.now() > deadline) throw new Error(`fewer than ${n} commits waiting for the standby after ${WAIT_BOUND_MS} ms`);
    await sleep(50);
  }
}

/**
 * Sets the standby requirement and returns once it is in force: a probe commit on a connection
 * of its own is seen waiting. The checkpointer applies the reloaded setting a moment after
 * pg_reload_conf(); a probe that commits before then is simply tried again.
 */
async function requireAbsentStandby(): Promise<pg.Client> {
  // A permanent table: a write to a temporary one writes no WAL, so its commit never waits for
  // a standby, and a probe that only touches one would try forever.
  await admin.query('CREATE TABLE IF NOT EXISTS commit_probe (n int)');
  await admin.query(`ALTER SYSTEM SET synchronous_standby_names = 'never_connects'`);
  await admin.query('SELECT pg_reload_conf()');
  const probe = new pg.Client({ connectionString: database.url });
  await probe.connect();
  probe.on('error', () => {});
  const deadline = Date.now() + WAIT_BOUND_MS;
  for (;;) {
    let settled = false;
    // A logged write that takes a transaction id, so its commit is one a standby must confirm.
    void probe.query('INSERT INTO commit_probe VALUES (1)').finally(() => (settled = true));
    await sleep(300);
    if (!settled && (await syncRepWaiters()) >= 1) return probe;
    if (Date.now() > deadline) throw new Error('the standby requirement never took effect');
    while (!settled) await sleep(20);
  }
}

async function liftStandbyRequirement(): Promise<void> {
  await admin.query('ALTER SYSTEM RESET synchronous_standby_names');
  await admin.query('SELECT pg_reload_conf()');
}

const postForm = (path: string, fields: Record<string, string>) => send(`${server}${path}`, { form: fields });

describe.skipIf(!postgresBinariesPresent())(`commit durability (PostgreSQL from ${POSTGRES_BIN})`, () => {
  let tv: { clientId: string };
  let pending: DeviceAuthorizationResponse;
  let approved: DeviceAuthorizationResponse;
  let probe: pg.Client | undefined;

  beforeAll(async () => {
    database = await createClusterDatabase();
    t = await startTestApp({ database });
    admin = new pg.Client({ connectionString: database.url });
    await admin.connect();
    tv = await seedClient(t, { kind: 'tv' });
    const user = await seedUser(t);
    const issue = async () =>
      (await postForm('/oauth/device/code', { client_id: tv.clientId, scope: 'openid offline_access' })).json<DeviceAuthorizationResponse>();
    await t.app.listen({ host: '127.0.0.1', port: 0 });
    server = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
    pending = await issue();
    approved = await issue();
    await decide(t, approved.user_code, user.userId, 'approve');
    // Both codes are past their first interval: the polls below are answered, not slowed down.
    t.clock.advance(10);
  }, 120_000);

  afterAll(async () => {
    if (admin) await liftStandbyRequirement().catch(() => {});
    await probe?.end().catch(() => {});
    await admin?.end().catch(() => {});
    // A failed run can leave a request whose client gave up: its connection would hold close() open.
    t?.app.server.closeAllConnections();
    await t?.close();
    await database?.drop();
  });

  it('a poll commits without waiting for durability; issuing a code and redeeming an approval wait for it', async () => {
    probe = await requireAbsentStandby();

    // The poll is answered while every synchronous commit on the cluster is held up.
    const polled = await postForm('/oauth/token', { grant_type: DEVICE_GRANT, client_id: tv.clientId, device_code: pending.device_code });
    expect(polled.status).toBe(400);
    expect(polled.json().error).toBe('authorization_pending');
    // Read on another connection: the poll is committed and visible.
    const recorded = await admin.query<{ polled: boolean }>(
      `SELECT last_polled_at IS NOT NULL AS polled FROM device_requests WHERE device_code_hash = sha256(convert_to($1::text, 'UTF8'))`,
      [pending.device_code],
    );
    expect(recorded.rows).toEqual([{ polled: true }]);

    // The redemption and a new code wait for the standby: no answer while it is required.
    const answers: Array<Promise<WebResponse>> = [
      postForm('/oauth/token', { grant_type: DEVICE_GRANT, client_id: tv.clientId, device_code: approved.device_code }),
      postForm('/oauth/device/code', { client_id: tv.clientId }),
    ];
    let answered = 0;
    for (const answer of answers) void answer.finally(() => answered++).catch(() => {});
    await waitForSyncRepWaiters(3);
    await sleep(500);
    expect(answered).toBe(0);

    await liftStandbyRequirement();
    const [redeemed, issued] = await Promise.all(answers);
    expect(redeemed!.status, redeemed!.body).toBe(200);
    expect(redeemed!.json().access_token).toEqual(expect.any(String));
    expect(issued!.status, issued!.body).toBe(200);
  }, 60_000);

  it('refuses to record a poll inside a transaction, whose other writes would then commit asynchronously too', async () => {
    await expect(t.deps.db.transaction().execute((trx) => recordDevicePoll(trx, new Uint8Array(32), tv.clientId, null, new Date()))).rejects.toThrow(
      /must not run inside a transaction/,
    );
  });
});
