import { sql, type Insertable } from 'kysely';
import type { Database } from '../db/connect.js';
import type { DevicePolicyRulesTable } from '../db/schema.js';
import { eventTypeLiteral } from '../events/event-log.js';

/** Every stored rule: the table holds a few per app at most, and each instance keeps all of them in memory. */
export async function listDevicePolicyRules(db: Database) {
  return db
    .selectFrom('device_policy_rules')
    .select([
      'rule_id',
      'client_id',
      'rule',
      'mode',
      'scopes',
      'country_list',
      'countries',
      sql<string[] | null>`asns::text[]`.as('asns'),
      'proximity_action',
      sql<string>`revision::text`.as('revision'),
      'set_at',
      sql<number>`refused::float8`.as('refused'),
      sql<number>`would_have_refused::float8`.as('would_have_refused'),
    ])
    .orderBy('client_id', (order) => order.nullsFirst())
    .orderBy('rule')
    .execute();
}

export type StoredPolicyRow = Awaited<ReturnType<typeof listDevicePolicyRules>>[number];

type NewRule = Omit<Insertable<DevicePolicyRulesTable>, 'rule_id'>;

/**
 * Sets one rule of one scope (an app, or every app) in one statement: a new revision, the counts
 * back to zero ("since it was set"). An unknown app fails its foreign key (23503).
 */
export async function setDevicePolicyRule(db: Database, rule: NewRule): Promise<void> {
  await db
    .insertInto('device_policy_rules')
    .values(rule)
    .onConflict((conflict) =>
      conflict.columns(['client_id', 'rule']).doUpdateSet((eb) => ({
        mode: eb.ref('excluded.mode'),
        scopes: eb.ref('excluded.scopes'),
        country_list: eb.ref('excluded.country_list'),
        countries: eb.ref('excluded.countries'),
        asns: eb.ref('excluded.asns'),
        proximity_action: eb.ref('excluded.proximity_action'),
        set_at: eb.ref('excluded.set_at'),
        revision: sql`nextval('device_policy_revisions')`,
        refused: sql`0`,
        would_have_refused: sql`0`,
      })),
    )
    .execute();
}

/** What a rule refused of one app's requests since the last flush. */
export interface AppCounts {
  clientId: string;
  refused: number;
  wouldHaveRefused: number;
  /** What the rule held against the last request counted (a country, an AS, a scope): never a secret. */
  lastDetail: string;
}

/**
 * Adds an instance's counts of one rule, only while the rule is still at the revision they were
 * made under, and records in the same statement one device_request.refused event per app counted
 * (reason policy, or policy_report_only for what a report-only rule would have refused). The
 * refusals themselves changed nothing (the requests were answered, nothing stored): these events
 * are observations, written with the counts they add to, at most a flush interval later.
 */
export async function addDevicePolicyCounts(db: Database, ruleId: string, revision: string, apps: readonly AppCounts[], now: Date): Promise<void> {
  const refused = apps.reduce((sum, app) => sum + app.refused, 0);
  const wouldHaveRefused = apps.reduce((sum, app) => sum + app.wouldHaveRefused, 0);
  await sql`
    WITH counted AS (
      UPDATE device_policy_rules
      SET refused = refused + ${refused}, would_have_refused = would_have_refused + ${wouldHaveRefused}
      WHERE rule_id = ${ruleId} AND revision = ${revision}::bigint
      RETURNING rule, mode, client_id
    )
    INSERT INTO events (type, client_id, reason, created_at, data)
    SELECT ${eventTypeLiteral('device_request.refused')}, app.client_id,
           CASE WHEN counted.mode = 'enforce' THEN 'policy' ELSE 'policy_report_only' END, ${now}::timestamptz,
           jsonb_build_object('rule', counted.rule, 'mode', counted.mode, 'global', counted.client_id IS NULL,
                              'refused', app.refused, 'would_have_refused', app.would_have_refused, 'last', app.last_detail)
    FROM counted,
         unnest(${apps.map((a) => a.clientId)}::text[], ${apps.map((a) => a.refused)}::int[],
                ${apps.map((a) => a.wouldHaveRefused)}::int[], ${apps.map((a) => a.lastDetail)}::text[])
           AS app(client_id, refused, would_have_refused, last_detail)`.execute(db);
}

/** Enabled apps registered for the device flow, and how many of them must prove a DPoP key (the self-assessment). */
export async function countDeviceFlowApps(db: Database, deviceGrant: string) {
  return db
    .selectFrom('clients')
    .select([sql<number>`count(*)::int`.as('apps'), sql<number>`count(*) FILTER (WHERE require_dpop)::int`.as('dpop')])
    .where('disabled_at', 'is', null)
    .where(sql<boolean>`${deviceGrant} = ANY (grant_types)`)
    .executeTakeFirstOrThrow();
}
