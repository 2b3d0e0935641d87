import { sql, type Kysely } from 'kysely';

// Frozen in time: this file imports only kysely and never changes once released.
// Plain SQL that PostgreSQL 15 and PGlite (PostgreSQL 17) both accept.

// The hot paths update two tables on every request: a refresh updates its grant (the current
// refresh token, its last use), a poll its device request (when it was polled). PostgreSQL checks
// every CHECK constraint of a row on every UPDATE, whichever columns changed, and reads each one's
// expression tree back from its stored text for every statement (ExecRelCheck): the eight
// constraints issue 27 and 31 added to grants (where a grant came from) cost each refresh more
// than the rest of its statement's planning, and device_requests' three are paid by every poll.
//
// The same rules, as triggers that fire only when a row is inserted or one of their columns is
// written (UPDATE OF): the origin of a grant is written once, and a poll writes none of them. A
// violation is still check_violation (SQLSTATE 23514) naming the rule, and the rules read as before.
//
// On an UPDATE they run AFTER the row is written, never BEFORE: once a table has any BEFORE
// UPDATE row trigger, PostgreSQL locks each row it updates (a heap lock, its own WAL record)
// before it even looks at the trigger's columns, so every poll and every refresh would pay that
// lock. An AFTER UPDATE OF trigger that does not fire costs an UPDATE no lock and no WAL, only a
// read of the old row version (a refusal still rolls the statement back). On an INSERT, where no
// row is locked, they run BEFORE as CHECK did.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE grants
      DROP CONSTRAINT grants_addresses_bounded,
      DROP CONSTRAINT grants_asns_in_range,
      DROP CONSTRAINT grants_countries_are_codes,
      DROP CONSTRAINT grants_decision_check,
      DROP CONSTRAINT grants_grant_type_check,
      DROP CONSTRAINT grants_networks_bounded,
      DROP CONSTRAINT grants_redeemer_action_check,
      DROP CONSTRAINT grants_signals_known;

    CREATE FUNCTION grants_follow_their_rules() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE
      signals CONSTANT text[] := ARRAY['country_mismatch', 'hosting_network', 'relay_network', 'unknown_location', 'redeemer_mismatch'];
      broken text;
    BEGIN
      -- As CHECK does, a rule whose test is NULL holds.
      IF NOT (length(NEW.signed_in_ip) <= 64 AND length(NEW.approver_ip) <= 64 AND length(NEW.redeemer_ip) <= 64) THEN
        broken := 'grants_addresses_bounded';
      ELSIF NOT (NEW.requester_asn BETWEEN 0 AND 4294967295 AND NEW.approver_asn BETWEEN 0 AND 4294967295 AND NEW.redeemer_asn BETWEEN 0 AND 4294967295) THEN
        broken := 'grants_asns_in_range';
      ELSIF NOT (NEW.requester_country ~ '^[A-Z]{2}$' AND NEW.approver_country ~ '^[A-Z]{2}$' AND NEW.redeemer_country ~ '^[A-Z]{2}$') THEN
        broken := 'grants_countries_are_codes';
      ELSIF NOT (NEW.decision IN ('allow', 'warn', 'confirm', 'deny')) THEN
        broken := 'grants_decision_check';
      ELSIF NOT (NEW.grant_type IN ('device_code', 'authorization_code')) THEN
        broken := 'grants_grant_type_check';
      ELSIF NOT (length(NEW.requester_network) <= 200 AND length(NEW.approver_network) <= 200 AND length(NEW.redeemer_network) <= 200) THEN
        broken := 'grants_networks_bounded';
      ELSIF NOT (NEW.redeemer_action IN ('allow', 'warn')) THEN
        broken := 'grants_redeemer_action_check';
      ELSIF NOT (NEW.approval_signals <@ signals AND NEW.redeemer_signals <@ signals) THEN
        broken := 'grants_signals_known';
      END IF;
      IF broken IS NOT NULL THEN
        RAISE EXCEPTION 'new row for relation "grants" violates rule "%"', broken USING ERRCODE = 'check_violation', CONSTRAINT = broken, TABLE = 'grants';
      END IF;
      RETURN NEW;
    END $$;

    CREATE TRIGGER grants_follow_their_rules BEFORE INSERT ON grants FOR EACH ROW EXECUTE FUNCTION grants_follow_their_rules();
    CREATE TRIGGER grants_follow_their_rules_when_written
      AFTER UPDATE OF signed_in_ip, approver_ip, redeemer_ip, requester_asn, approver_asn, redeemer_asn,
        requester_country, approver_country, redeemer_country, decision, grant_type, requester_network,
        approver_network, redeemer_network, redeemer_action, approval_signals, redeemer_signals
      ON grants FOR EACH ROW EXECUTE FUNCTION grants_follow_their_rules();

    ALTER TABLE device_requests
      DROP CONSTRAINT device_requests_denied_reason_check,
      DROP CONSTRAINT device_requests_phrase_with_its_choices,
      DROP CONSTRAINT device_requests_status_check;

    CREATE FUNCTION device_requests_follow_their_rules() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE
      broken text;
    BEGIN
      IF NOT (NEW.status IN ('pending', 'approved', 'denied', 'redeemed')) THEN
        broken := 'device_requests_status_check';
      ELSIF NOT (NEW.denied_reason IN ('user_denied', 'wrong_phrase', 'user_banned', 'policy', 'redeemer_mismatch')) THEN
        broken := 'device_requests_denied_reason_check';
      ELSIF NOT ((NEW.phrase IS NULL) = (NEW.phrase_choices IS NULL)) THEN
        broken := 'device_requests_phrase_with_its_choices';
      END IF;
      IF broken IS NOT NULL THEN
        RAISE EXCEPTION 'new row for relation "device_requests" violates rule "%"', broken USING ERRCODE = 'check_violation', CONSTRAINT = broken, TABLE = 'device_requests';
      END IF;
      RETURN NEW;
    END $$;

    CREATE TRIGGER device_requests_follow_their_rules BEFORE INSERT ON device_requests FOR EACH ROW EXECUTE FUNCTION device_requests_follow_their_rules();
    CREATE TRIGGER device_requests_follow_their_rules_when_written
      AFTER UPDATE OF status, denied_reason, phrase, phrase_choices
      ON device_requests FOR EACH ROW EXECUTE FUNCTION device_requests_follow_their_rules();
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP TRIGGER device_requests_follow_their_rules_when_written ON device_requests;
    DROP TRIGGER device_requests_follow_their_rules ON device_requests;
    DROP FUNCTION device_requests_follow_their_rules();
    ALTER TABLE device_requests
      ADD CONSTRAINT device_requests_status_check CHECK (status IN ('pending', 'approved', 'denied', 'redeemed')) NOT VALID,
      ADD CONSTRAINT device_requests_denied_reason_check
        CHECK (denied_reason IN ('user_denied', 'wrong_phrase', 'user_banned', 'policy', 'redeemer_mismatch')) NOT VALID,
      ADD CONSTRAINT device_requests_phrase_with_its_choices CHECK ((phrase IS NULL) = (phrase_choices IS NULL)) NOT VALID;

    DROP TRIGGER grants_follow_their_rules_when_written ON grants;
    DROP TRIGGER grants_follow_their_rules ON grants;
    DROP FUNCTION grants_follow_their_rules();
    ALTER TABLE grants
      ADD CONSTRAINT grants_addresses_bounded CHECK (length(signed_in_ip) <= 64 AND length(approver_ip) <= 64 AND length(redeemer_ip) <= 64) NOT VALID,
      ADD CONSTRAINT grants_asns_in_range CHECK (
        requester_asn BETWEEN 0 AND 4294967295 AND approver_asn BETWEEN 0 AND 4294967295 AND redeemer_asn BETWEEN 0 AND 4294967295) NOT VALID,
      ADD CONSTRAINT grants_countries_are_codes CHECK (
        requester_country ~ '^[A-Z]{2}$' AND approver_country ~ '^[A-Z]{2}$' AND redeemer_country ~ '^[A-Z]{2}$') NOT VALID,
      ADD CONSTRAINT grants_decision_check CHECK (decision IN ('allow', 'warn', 'confirm', 'deny')) NOT VALID,
      ADD CONSTRAINT grants_grant_type_check CHECK (grant_type IN ('device_code', 'authorization_code')) NOT VALID,
      ADD CONSTRAINT grants_networks_bounded CHECK (
        length(requester_network) <= 200 AND length(approver_network) <= 200 AND length(redeemer_network) <= 200) NOT VALID,
      ADD CONSTRAINT grants_redeemer_action_check CHECK (redeemer_action IN ('allow', 'warn')) NOT VALID,
      ADD CONSTRAINT grants_signals_known CHECK (
        approval_signals <@ ARRAY['country_mismatch', 'hosting_network', 'relay_network', 'unknown_location', 'redeemer_mismatch']
        AND redeemer_signals <@ ARRAY['country_mismatch', 'hosting_network', 'relay_network', 'unknown_location', 'redeemer_mismatch']) NOT VALID;
  `.execute(db);
}
