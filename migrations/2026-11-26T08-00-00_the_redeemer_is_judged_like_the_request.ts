import { sql, type Kysely } from 'kysely';

// Frozen in time: this file imports only kysely and never changes once released.
// Plain SQL that PostgreSQL 15 and PGlite (PostgreSQL 17) both accept.

// Issue 27 §3: the poll that collects the tokens is judged like the request. The approval stores
// the approver's address on the request, so that the poll's one statement returns everything the
// judgement needs; a redeemer the operator's policy refuses denies the request with a reason of its
// own. The grant keeps the redeemer's address and what its check came to (the requester's address
// is signed_in_ip), and the approver's address, which a later refresh is compared with.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE device_requests ADD COLUMN approver_ip text;
    ALTER TABLE device_requests ADD COLUMN redeemer_ip text;
    ALTER TABLE device_requests DROP CONSTRAINT device_requests_denied_reason_check;
    ALTER TABLE device_requests ADD CONSTRAINT device_requests_denied_reason_check
      CHECK (denied_reason IN ('user_denied', 'wrong_phrase', 'user_banned', 'policy', 'redeemer_mismatch'));
    ALTER TABLE grants ADD COLUMN approver_ip text;
    ALTER TABLE grants ADD COLUMN redeemer_ip text;
    ALTER TABLE grants ADD COLUMN redeemer_action text CHECK (redeemer_action IN ('allow', 'warn'));
    ALTER TABLE grants ADD COLUMN redeemer_signals text[];
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    UPDATE device_requests SET denied_reason = 'policy' WHERE denied_reason = 'redeemer_mismatch';
    ALTER TABLE device_requests DROP CONSTRAINT device_requests_denied_reason_check;
    ALTER TABLE device_requests ADD CONSTRAINT device_requests_denied_reason_check
      CHECK (denied_reason IN ('user_denied', 'wrong_phrase', 'user_banned', 'policy'));
    ALTER TABLE device_requests DROP COLUMN approver_ip;
    ALTER TABLE device_requests DROP COLUMN redeemer_ip;
    ALTER TABLE grants DROP COLUMN approver_ip;
    ALTER TABLE grants DROP COLUMN redeemer_ip;
    ALTER TABLE grants DROP COLUMN redeemer_action;
    ALTER TABLE grants DROP COLUMN redeemer_signals;
  `.execute(db);
}
