import { sql, type Kysely } from 'kysely';

// Frozen in time: this file imports only kysely and never changes once released.
// Plain SQL that PostgreSQL 15 and PGlite (PostgreSQL 17) both accept.

// Issue 31 §1: a device-code phishing campaign is seen, and undone, by where its grants came from.
// A grant keeps its origin for as long as it lives: how it was made, when it was approved, the
// network (AS number and organisation), country and hosting flag of the requester, the approver
// and the redeemer (their addresses are signed_in_ip, approver_ip and redeemer_ip), the signals
// the approval page raised, and what the page decided (and whether the user ticked its box). The
// request that held most of this is purged within days; the grant lives for months. A code-flow
// grant's signed_in_ip is where the user signed in and agreed, which its code carries until then.
// Every text is bounded here, so that nothing unbounded reaches the table whatever the caller.
// Existing grants get what their "issued" event recorded of the decision.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE authorization_codes ADD COLUMN signed_in_ip text
      CONSTRAINT authorization_codes_signed_in_ip_bounded CHECK (length(signed_in_ip) <= 64);

    ALTER TABLE grants
      ADD COLUMN grant_type text,
      ADD COLUMN approved_at timestamptz,
      ADD COLUMN requester_asn bigint,
      ADD COLUMN requester_network text,
      ADD COLUMN requester_country text,
      ADD COLUMN requester_hosting boolean,
      ADD COLUMN approver_asn bigint,
      ADD COLUMN approver_network text,
      ADD COLUMN approver_country text,
      ADD COLUMN approver_hosting boolean,
      ADD COLUMN redeemer_asn bigint,
      ADD COLUMN redeemer_network text,
      ADD COLUMN redeemer_country text,
      ADD COLUMN redeemer_hosting boolean,
      ADD COLUMN approval_signals text[],
      ADD COLUMN decision text,
      ADD COLUMN decision_confirmed boolean;

    UPDATE grants g SET
      grant_type = CASE
        WHEN EXISTS (SELECT 1 FROM authorization_codes a WHERE a.grant_id = g.grant_id)
          OR EXISTS (SELECT 1 FROM grant_events e WHERE e.grant_id = g.grant_id AND e.event = 'issued' AND e.reason = 'authorization_code')
        THEN 'authorization_code' ELSE 'device_code' END,
      approved_at = g.created_at;

    UPDATE grants g SET
      requester_asn = CASE WHEN jsonb_typeof(d.details->'requester'->'asn') = 'number' THEN (d.details->'requester'->>'asn')::bigint END,
      requester_network = left(d.details->'requester'->>'network', 200),
      requester_country = CASE WHEN d.details->'requester'->>'country' ~ '^[A-Z]{2}$' THEN d.details->'requester'->>'country' END,
      requester_hosting = CASE WHEN jsonb_typeof(d.details->'requester'->'hosting') = 'boolean' THEN (d.details->'requester'->>'hosting')::boolean END,
      approver_asn = CASE WHEN jsonb_typeof(d.details->'approver'->'asn') = 'number' THEN (d.details->'approver'->>'asn')::bigint END,
      approver_network = left(d.details->'approver'->>'network', 200),
      approver_country = CASE WHEN d.details->'approver'->>'country' ~ '^[A-Z]{2}$' THEN d.details->'approver'->>'country' END,
      approver_hosting = CASE WHEN jsonb_typeof(d.details->'approver'->'hosting') = 'boolean' THEN (d.details->'approver'->>'hosting')::boolean END,
      approval_signals = CASE WHEN jsonb_typeof(d.details->'signals') = 'array'
        THEN ARRAY(SELECT s FROM jsonb_array_elements_text(d.details->'signals') s
                   WHERE s IN ('country_mismatch', 'hosting_network', 'relay_network', 'unknown_location', 'redeemer_mismatch')) END,
      decision = CASE WHEN d.details->>'action' IN ('allow', 'warn', 'confirm', 'deny') THEN d.details->>'action' END
    FROM (
      SELECT DISTINCT ON (e.grant_id) e.grant_id, e.details
      FROM grant_events e
      WHERE e.event = 'issued' AND e.reason = 'device_code' AND jsonb_typeof(e.details) = 'object'
      ORDER BY e.grant_id, e.event_id
    ) d
    WHERE d.grant_id = g.grant_id AND g.grant_type = 'device_code';

    ALTER TABLE grants
      ALTER COLUMN grant_type SET NOT NULL,
      ALTER COLUMN approved_at SET NOT NULL,
      ADD CONSTRAINT grants_grant_type_check CHECK (grant_type IN ('device_code', 'authorization_code')),
      ADD CONSTRAINT grants_asns_in_range CHECK (
        requester_asn BETWEEN 0 AND 4294967295 AND approver_asn BETWEEN 0 AND 4294967295 AND redeemer_asn BETWEEN 0 AND 4294967295),
      ADD CONSTRAINT grants_countries_are_codes CHECK (
        requester_country ~ '^[A-Z]{2}$' AND approver_country ~ '^[A-Z]{2}$' AND redeemer_country ~ '^[A-Z]{2}$'),
      ADD CONSTRAINT grants_networks_bounded CHECK (
        length(requester_network) <= 200 AND length(approver_network) <= 200 AND length(redeemer_network) <= 200),
      ADD CONSTRAINT grants_signals_known CHECK (
        approval_signals <@ ARRAY['country_mismatch', 'hosting_network', 'relay_network', 'unknown_location', 'redeemer_mismatch']::text[]
        AND redeemer_signals <@ ARRAY['country_mismatch', 'hosting_network', 'relay_network', 'unknown_location', 'redeemer_mismatch']::text[]),
      ADD CONSTRAINT grants_decision_check CHECK (decision IN ('allow', 'warn', 'confirm', 'deny'));
    -- Older rows may hold whatever a proxy forwarded; new rows hold located, bounded addresses.
    ALTER TABLE grants ADD CONSTRAINT grants_addresses_bounded CHECK (
      length(signed_in_ip) <= 64 AND length(approver_ip) <= 64 AND length(redeemer_ip) <= 64) NOT VALID;

    -- A campaign is found by its networks and when it was approved; the rest narrows these.
    CREATE INDEX grants_by_approval ON grants (approved_at, grant_id);
    CREATE INDEX grants_by_requester_asn ON grants (requester_asn, approved_at) WHERE requester_asn IS NOT NULL;
    CREATE INDEX grants_by_redeemer_asn ON grants (redeemer_asn, approved_at) WHERE redeemer_asn IS NOT NULL;
    CREATE INDEX grants_by_client ON grants (client_id, approved_at);
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP INDEX grants_by_approval;
    DROP INDEX grants_by_requester_asn;
    DROP INDEX grants_by_redeemer_asn;
    DROP INDEX grants_by_client;
    ALTER TABLE grants
      DROP CONSTRAINT grants_addresses_bounded,
      DROP CONSTRAINT grants_signals_known,
      DROP COLUMN grant_type,
      DROP COLUMN approved_at,
      DROP COLUMN requester_asn,
      DROP COLUMN requester_network,
      DROP COLUMN requester_country,
      DROP COLUMN requester_hosting,
      DROP COLUMN approver_asn,
      DROP COLUMN approver_network,
      DROP COLUMN approver_country,
      DROP COLUMN approver_hosting,
      DROP COLUMN redeemer_asn,
      DROP COLUMN redeemer_network,
      DROP COLUMN redeemer_country,
      DROP COLUMN redeemer_hosting,
      DROP COLUMN approval_signals,
      DROP COLUMN decision,
      DROP COLUMN decision_confirmed;
    ALTER TABLE authorization_codes DROP COLUMN signed_in_ip;
  `.execute(db);
}
