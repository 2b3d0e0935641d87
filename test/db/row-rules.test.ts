import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { seedClient, seedUser, startTestApp, type TestApp } from '../helpers/app.js';
import { poll, startDeviceFlow } from '../helpers/device.js';
import { grantOf, refresh, signIn, type TestClient } from '../helpers/tokens.js';

/**
 * The rules of a grant's origin and of a device request's state (migration 2026-11-26T18-40-00)
 * hold whenever their columns are written, as CHECK constraints did, and cost the hot paths
 * nothing: a refresh and a poll write none of their columns, so the rules do not run for them
 * (PostgreSQL runs every CHECK constraint of a row on every UPDATE, and a refresh paid for eight).
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
    await sql`ALTER TABLE ${sql.table(table)} DISABLE TRIGGER ${sql.id(`${table}_follow_their_rules`)}`.execute(trx);
    await sql`UPDATE ${sql.table(table)} SET ${set} WHERE ${where}`.execute(trx);
    await sql`ALTER TABLE ${sql.table(table)} ENABLE TRIGGER ${sql.id(`${table}_follow_their_rules`)}`.execute(trx);
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
});
