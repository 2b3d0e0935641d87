import { sql, type Kysely } from 'kysely';

// Frozen in time: this file imports only kysely and never changes once released.
// Plain SQL that PostgreSQL 15 and PGlite (PostgreSQL 17) both accept.

// Issue 32 §2: webhook endpoints an operator registers. The signing secret (Standard Webhooks,
// whsec_…) is shown once and stored sealed under the key-encryption key, never readable again
// through the admin API. event_types null: every type, present and future. Whether an endpoint is
// paused (by the operator or because it kept failing) is the delivery engine's delivery_targets.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE webhooks (
      webhook_id text PRIMARY KEY,
      url text NOT NULL,
      event_types text[],
      sealed_secret bytea NOT NULL,
      created_at timestamptz NOT NULL
    );
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DELETE FROM outbound_deliveries WHERE target_kind = 'webhook';
    DELETE FROM delivery_targets WHERE target_kind = 'webhook';
    DROP TABLE webhooks;
  `.execute(db);
}
