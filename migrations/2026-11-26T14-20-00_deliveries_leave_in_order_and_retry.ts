import { sql, type Kysely } from 'kysely';

// Frozen in time: this file imports only kysely and never changes once released.
// Plain SQL that PostgreSQL 15 and PGlite (PostgreSQL 17) both accept.

// Issue 32: the outbound delivery engine (src/delivery/) that webhooks and Shared Signals push
// share. One row per message per target; a target is a webhook endpoint or an SSF stream, named by
// its kind and id (no foreign key: the kinds keep their own tables and remove their rows).
//
// next_attempt_at NULL means held: the target is paused and keeps its backlog until it resumes.
// Rows of one (target, ordering_key) go out one after the other, oldest first; a row whose
// ordering_key is null waits for nobody. message_id is what the receiver sees (webhook-id, a SET's
// jti), the same on every attempt. payload: what a kind needs to render a message that is not an
// event of the log (an SSF verification event); null for events.
//
// delivery_targets holds what the engine knows of a target: since when it has been failing, how
// often in a row (the probe backoff of a failing target), and whether it is paused and why.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE outbound_deliveries (
      delivery_id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      target_kind text NOT NULL,
      target_id text NOT NULL,
      event_id bigint,
      payload jsonb,
      ordering_key text,
      message_id text NOT NULL,
      next_attempt_at timestamptz,
      attempts integer NOT NULL DEFAULT 0,
      claimed_until timestamptz,
      delivered_at timestamptz,
      gave_up_at timestamptz,
      created_at timestamptz NOT NULL
    );
    CREATE INDEX outbound_deliveries_due ON outbound_deliveries (next_attempt_at, delivery_id)
      WHERE delivered_at IS NULL AND gave_up_at IS NULL AND next_attempt_at IS NOT NULL;
    CREATE INDEX outbound_deliveries_chain ON outbound_deliveries (target_kind, target_id, ordering_key, delivery_id)
      WHERE delivered_at IS NULL AND gave_up_at IS NULL;
    CREATE INDEX outbound_deliveries_claimed ON outbound_deliveries (target_kind, target_id)
      WHERE claimed_until IS NOT NULL AND delivered_at IS NULL AND gave_up_at IS NULL;
    CREATE INDEX outbound_deliveries_target ON outbound_deliveries (target_kind, target_id, delivery_id);
    CREATE INDEX outbound_deliveries_finished ON outbound_deliveries (created_at)
      WHERE delivered_at IS NOT NULL OR gave_up_at IS NOT NULL;

    CREATE TABLE delivery_attempts (
      attempt_id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      delivery_id bigint NOT NULL REFERENCES outbound_deliveries (delivery_id) ON DELETE CASCADE,
      attempted_at timestamptz NOT NULL,
      http_status integer,
      error text,
      duration_ms integer NOT NULL
    );
    CREATE INDEX delivery_attempts_delivery ON delivery_attempts (delivery_id, attempt_id);

    CREATE TABLE delivery_targets (
      target_kind text NOT NULL,
      target_id text NOT NULL,
      failing_since timestamptz,
      failures integer NOT NULL DEFAULT 0,
      paused_at timestamptz,
      pause_reason text CHECK (pause_reason IN ('operator', 'failing')),
      PRIMARY KEY (target_kind, target_id),
      CHECK ((paused_at IS NULL) = (pause_reason IS NULL))
    );
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP TABLE delivery_targets;
    DROP TABLE delivery_attempts;
    DROP TABLE outbound_deliveries;
  `.execute(db);
}
