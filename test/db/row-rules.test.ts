import { setTimeout as sleep } from 'node:timers/promises';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { seedClient, seedUser, startTestApp, type TestApp } from '../helpers/app.js';
import { poll, startDeviceFlow } from '../helpers/device.js';
import { grantOf, refresh, signIn, type TestClient } from '../helpers/tokens.js';

const onPostgres = Boolean(process.env.TEST_DATABASE_URL);

/**
 * The rules of a grant's origin and of a device request's state (migration 2026-11-26T18-40-00)
 * hold whenever their columns are written, as CHECK constraints did, and cost the hot paths
 * nothing: a refresh and a poll write none of their columns, so the rules do not run for them
 * (PostgreSQL runs every CHECK constraint of a row on every UPDATE, and a refresh paid for eight).
 * On an update they run after the row is written: a BEFORE UPDATE row trigger, whatever its
 * columns, makes PostgreSQL lock every row an UPDATE touches before it looks at them.
 */

let t: TestApp;
let tv: TestClient;
beforeAll(async () => {
  t = await startTestApp();
  tv = await seedClient(t, { kind: 'tv' });
});
afterAll(async () => {
  await t?.close();
});

async function refusal(statement: Promise<unknown>): Promise<{ code?: string; constraint?: string }> {
  try {
    await statement;
  } catch (error) {
    const { code, constraint } = error as { code?: string; constraint?: string };
    return { code, constraint };
  }
  throw new Error('the statement was not refused');
}

/** Writes a value the rules refuse, with them switched off for this one statement's transaction. */
async function breakRule(table: 'grants' | 'device_requests', set: ReturnType<typeof sql>, where: ReturnType<typeof sql>) {
  await t.deps.db.transaction().execute(async (trx) => {
    await sql`ALTER TABLE ${sql.table(table)} DISABLE TRIGGER ${sql.id(`${table}_follow_their_rules_when_written`)}`.execute(trx);
    await sql`UPDATE ${sql.table(table)} SET ${set} WHERE ${where}`.execute(trx);
    await sql`ALTER TABLE ${sql.table(table)} ENABLE TRIGGER ${sql.id(`${table}_follow_their_rules_when_written`)}`.execute(trx);
  });
}

describe('the rules of grants and device requests', () => {
  it('a grant whose origin breaks a rule is refused as check_violation naming the rule, on insert and on update', async () => {
    const user = await seedUser(t);
    const { grant_id } = await grantOf(t, (await signIn(t, tv, user.userId)).access_token);
    expect(await refusal(sql`UPDATE grants SET requester_country = 'usa' WHERE grant_id = ${grant_id}`.execute(t.deps.db))).toEqual({
      code: '23514',
      constraint: 'grants_countries_are_codes',
    });
    expect(await refusal(sql`UPDATE grants SET approval_signals = ARRAY['trust_me'] WHERE grant_id = ${grant_id}`.execute(t.deps.db))).toEqual({
      code: '23514',
      constraint: 'grants_signals_known',
    });
    const copy = sql`
      INSERT INTO grants
      SELECT (jsonb_populate_record(g, jsonb_build_object('grant_id', gen_random_uuid(), 'redeemer_network', repeat('x', 201)))).*
      FROM grants g WHERE grant_id = ${grant_id}`;
    expect(await refusal(copy.execute(t.deps.db))).toEqual({ code: '23514', constraint: 'grants_networks_bounded' });
    expect(await refusal(sql`UPDATE grants SET requester_asn = -1 WHERE grant_id = ${grant_id}`.execute(t.deps.db))).toEqual({
      code: '23514',
      constraint: 'grants_asns_in_range',
    });
  });

  it('a refresh writes none of the origin: the rules do not run for it', async () => {
    const user = await seedUser(t);
    const tokens = await signIn(t, tv, user.userId);
    const { grant_id } = await grantOf(t, tokens.access_token);
    // A row the rules refuse (as no statement of ours could write it): a refresh still rotates it.
    await breakRule('grants', sql`requester_country = 'not a code'`, sql`grant_id = ${grant_id}`);
    const res = await refresh(t, tv, tokens.refresh_token!);
    expect(res.statusCode, res.body).toBe(200);
  });

  it('a device request in a state the rules do not know is refused; a poll writes none of the state and is answered', async () => {
    const flow = await startDeviceFlow(t, tv.clientId);
    // The one pending request of this file (each sign-in's request is redeemed).
    const byCode = sql`status = 'pending'`;
    expect(await refusal(sql`UPDATE device_requests SET status = 'bogus' WHERE ${byCode}`.execute(t.deps.db))).toEqual({
      code: '23514',
      constraint: 'device_requests_status_check',
    });
    expect(await refusal(sql`UPDATE device_requests SET phrase = NULL WHERE ${byCode} AND phrase IS NOT NULL`.execute(t.deps.db))).toEqual({
      code: '23514',
      constraint: 'device_requests_phrase_with_its_choices',
    });
    await breakRule('device_requests', sql`denied_reason = 'not a reason'`, byCode);
    t.clock.advance(flow.interval);
    const res = await poll(t, tv.clientId, flow.device_code);
    expect(res.json()).toMatchObject({ error: 'authorization_pending' });
  });

  it('grants and device_requests have no BEFORE UPDATE row trigger, which would lock every row a poll or a refresh updates', async () => {
    // pg_trigger.tgtype bits: 1 row, 2 before, 16 update.
    const { rows } = await sql<{ tgname: string }>`
      SELECT tgname FROM pg_trigger
      WHERE tgrelid IN ('grants'::regclass, 'device_requests'::regclass) AND NOT tgisinternal
        AND tgtype & 1 = 1 AND tgtype & 2 = 2 AND tgtype & 16 = 16`.execute(t.deps.db);
    expect(rows).toEqual([]);
  });

  // The WAL is the evidence: a row lock is a heap LOCK record of its own. pg_walinspect reads it
  // on PostgreSQL; the embedded database has no such extension (the test above covers it there).
  it.skipIf(!onPostgres)('a refresh and a poll write no row lock into the WAL for grants or device_requests; a locking read does', async () => {
    const db = t.deps.db;
    await sql`CREATE EXTENSION IF NOT EXISTS pg_walinspect`.execute(db);
    const { rows: relations } = await sql<{ pattern: string }>`
      SELECT '% rel %/' || d.oid || '/' || pg_relation_filenode(r) || ' %' AS pattern
      FROM pg_database d, unnest(ARRAY['grants'::regclass, 'device_requests'::regclass]) AS r
      WHERE d.datname = current_database()`.execute(db);
    const patterns = relations.map((r) => r.pattern);
    const locksDuring = async (work: () => Promise<void>): Promise<number> => {
      const { rows: start } = await sql<{ lsn: string }>`SELECT pg_current_wal_insert_lsn()::text AS lsn`.execute(db);
      await work();
      // pg_walinspect reads only flushed WAL, and the poll commits asynchronously: wait (bounded)
      // for the WAL writer to flush past the work.
      const { rows: end } = await sql<{ lsn: string }>`SELECT pg_current_wal_insert_lsn()::text AS lsn`.execute(db);
      for (let attempt = 0; ; attempt++) {
        const { rows } = await sql<{ flushed: boolean }>`SELECT pg_current_wal_flush_lsn() >= ${end[0]!.lsn}::pg_lsn AS flushed`.execute(db);
        if (rows[0]!.flushed) break;
        if (attempt >= 100) throw new Error('the WAL was not flushed within 5 s');
        await sleep(50);
      }
      const { rows } = await sql<{ n: number }>`
        SELECT count(*)::int AS n FROM pg_get_wal_records_info(${start[0]!.lsn}::pg_lsn, ${end[0]!.lsn}::pg_lsn)
        WHERE resource_manager = 'Heap' AND record_type = 'LOCK' AND block_ref LIKE ANY (${patterns}::text[])`.execute(db);
      return rows[0]!.n;
    };

    const user = await seedUser(t);
    const tokens = await signIn(t, tv, user.userId);
    const flow = await startDeviceFlow(t, tv.clientId);
    t.clock.advance(flow.interval);
    expect(
      await locksDuring(async () => {
        expect((await refresh(t, tv, tokens.refresh_token!)).statusCode).toBe(200);
        expect((await poll(t, tv.clientId, flow.device_code)).json()).toMatchObject({ error: 'authorization_pending' });
      }),
    ).toBe(0);
    // The same count sees a lock when there is one: a locking read of a grant.
    const { grant_id } = await grantOf(t, tokens.access_token);
    expect(
      await locksDuring(async () => {
        await db.transaction().execute((trx) => sql`SELECT 1 FROM grants WHERE grant_id = ${grant_id} FOR UPDATE`.execute(trx));
      }),
    ).toBe(1);
  });
});
