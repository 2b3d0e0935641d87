import { sql, type Kysely } from 'kysely';

// Frozen in time: this file imports only kysely and never changes once released.
// Plain SQL that PostgreSQL 15 and PGlite (PostgreSQL 17) both accept.

// Every decision on the approval page records where the requester and the approver were and the
// warnings the page showed: on the request (kept as long as it), and on the chain's "issued"
// event, so an operator can see what the user was told. A request the operator's policy refuses
// is denied with a reason of its own.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE device_requests ADD COLUMN decision_context jsonb;
    ALTER TABLE link_events ADD COLUMN details jsonb;
    ALTER TABLE device_requests DROP CONSTRAINT device_requests_denied_reason_check;
    ALTER TABLE device_requests ADD CONSTRAINT device_requests_denied_reason_check
      CHECK (denied_reason IN ('user_denied', 'wrong_phrase', 'user_banned', 'policy'));
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    UPDATE device_requests SET denied_reason = 'user_denied' WHERE denied_reason = 'policy';
    ALTER TABLE device_requests DROP CONSTRAINT device_requests_denied_reason_check;
    ALTER TABLE device_requests ADD CONSTRAINT device_requests_denied_reason_check
      CHECK (denied_reason IN ('user_denied', 'wrong_phrase', 'user_banned'));
    ALTER TABLE device_requests DROP COLUMN decision_context;
    ALTER TABLE link_events DROP COLUMN details;
  `.execute(db);
}
