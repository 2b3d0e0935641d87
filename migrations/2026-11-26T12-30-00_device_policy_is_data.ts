import { sql, type Kysely } from 'kysely';

// Frozen in time: this file imports only kysely and never changes once released.
// Plain SQL that PostgreSQL 15 and PGlite (PostgreSQL 17) both accept.

// Issue 31 §2: the operator's device-flow rules are data, switched at run time. One row per rule
// and scope (an app, or every app when client_id is null: NULLS NOT DISTINCT makes the global row
// unique too). Each instance keeps every rule in memory; a trigger names the change on commit so
// that each reloads them at once, and only for a change of the rule itself: the counters below
// are added to every second by every instance and announce nothing.
//
// revision changes whenever the rule is set, even to the same values: "since it was set" is since
// that revision, and counts an instance still holds for an older revision are dropped, never
// added to the new one.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE SEQUENCE device_policy_revisions;

    CREATE TABLE device_policy_rules (
      rule_id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      client_id text REFERENCES clients (client_id) ON DELETE CASCADE,
      rule text NOT NULL CHECK (rule IN (
        'device-flow', 'device-scopes', 'device-countries', 'device-asns', 'device-hosting',
        'proximity-country-mismatch', 'proximity-hosting-network', 'proximity-relay-network',
        'proximity-unknown-location', 'proximity-redeemer-mismatch'
      )),
      mode text NOT NULL CHECK (mode IN ('off', 'report-only', 'enforce')),
      scopes text[],
      country_list text CHECK (country_list IN ('allow', 'block')),
      countries text[],
      asns bigint[],
      proximity_action text CHECK (proximity_action IN ('allow', 'warn', 'confirm', 'deny')),
      revision bigint NOT NULL DEFAULT nextval('device_policy_revisions'),
      set_at timestamptz NOT NULL,
      refused bigint NOT NULL DEFAULT 0,
      would_have_refused bigint NOT NULL DEFAULT 0,
      UNIQUE NULLS NOT DISTINCT (client_id, rule)
    );

    CREATE FUNCTION announce_device_policy_change() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      PERFORM pg_notify('device_auth_policy_changes', '');
      RETURN NULL;
    END
    $$;

    CREATE TRIGGER device_policy_changes_are_announced
      AFTER INSERT OR DELETE OR UPDATE OF mode, scopes, country_list, countries, asns, proximity_action, revision
      ON device_policy_rules
      FOR EACH STATEMENT EXECUTE FUNCTION announce_device_policy_change();
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP TABLE device_policy_rules;
    DROP FUNCTION announce_device_policy_change();
    DROP SEQUENCE device_policy_revisions;
  `.execute(db);
}
