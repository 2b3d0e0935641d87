import { sql, type Kysely } from 'kysely';

// Frozen in time: this file imports only kysely and never changes once released.
// Plain SQL that PostgreSQL 15 and PGlite (PostgreSQL 17) both accept.

// Issue 32 §1: the grant events become the one event log of every change. A type names the fact
// ("grant.revoked"); grant, user and app are optional, and are kept after the grant, user or app
// is deleted (the purge removes events after EVENT_RETENTION_DAYS), so the trigger that deleted
// a grant's events with it stops doing so. `actor` says who made an admin change and how.
//
// transaction_id is the writing transaction's id. The consumers that carry events out of the
// server (webhooks, Shared Signals) read only events of transactions older than every running
// one (pg_snapshot_xmin), in (transaction_id, event_id) order, so an event that commits after a
// later-numbered one is never skipped by a consumer's cursor.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE grant_events RENAME TO events;
    ALTER TABLE events RENAME CONSTRAINT grant_events_pkey TO events_pkey;
    ALTER INDEX grant_events_grant RENAME TO events_grant;
    ALTER INDEX grant_events_user RENAME TO events_user;
    ALTER SEQUENCE grant_events_event_id_seq RENAME TO events_event_id_seq;
    ALTER TABLE events RENAME COLUMN event TO type;
    ALTER TABLE events RENAME COLUMN details TO data;
    UPDATE events SET type = 'grant.' || type;
    ALTER TABLE events
      ALTER COLUMN grant_id DROP NOT NULL,
      ALTER COLUMN user_id DROP NOT NULL,
      ALTER COLUMN client_id DROP NOT NULL,
      ADD COLUMN actor jsonb,
      ADD COLUMN transaction_id xid8 NOT NULL DEFAULT pg_current_xact_id();
    CREATE INDEX events_committed ON events (transaction_id, event_id);

    CREATE TABLE event_cursors (
      consumer text PRIMARY KEY,
      transaction_id xid8 NOT NULL,
      event_id bigint NOT NULL
    );

    CREATE OR REPLACE FUNCTION delete_rows_of_deleted_grants() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      DELETE FROM refresh_tokens r USING deleted_grants d WHERE r.grant_id = d.grant_id;
      DELETE FROM access_tokens a USING deleted_grants d WHERE a.grant_id = d.grant_id;
      RETURN NULL;
    END
    $$;
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE OR REPLACE FUNCTION delete_rows_of_deleted_grants() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      DELETE FROM refresh_tokens r USING deleted_grants d WHERE r.grant_id = d.grant_id;
      DELETE FROM access_tokens a USING deleted_grants d WHERE a.grant_id = d.grant_id;
      DELETE FROM events e USING deleted_grants d WHERE e.grant_id = d.grant_id;
      RETURN NULL;
    END
    $$;
    DROP TABLE event_cursors;
    DROP INDEX events_committed;
    -- Before, a grant's events lived and died with it: the events of deleted grants (and of no grant) go.
    DELETE FROM events e
    WHERE e.user_id IS NULL OR e.client_id IS NULL OR e.type NOT LIKE 'grant.%'
       OR NOT EXISTS (SELECT 1 FROM grants g WHERE g.grant_id = e.grant_id);
    ALTER TABLE events
      DROP COLUMN transaction_id,
      DROP COLUMN actor,
      ALTER COLUMN grant_id SET NOT NULL,
      ALTER COLUMN user_id SET NOT NULL,
      ALTER COLUMN client_id SET NOT NULL;
    UPDATE events SET type = substr(type, length('grant.') + 1);
    ALTER TABLE events RENAME COLUMN data TO details;
    ALTER TABLE events RENAME COLUMN type TO event;
    ALTER SEQUENCE events_event_id_seq RENAME TO grant_events_event_id_seq;
    ALTER INDEX events_user RENAME TO grant_events_user;
    ALTER INDEX events_grant RENAME TO grant_events_grant;
    ALTER TABLE events RENAME CONSTRAINT events_pkey TO grant_events_pkey;
    ALTER TABLE events RENAME TO grant_events;
  `.execute(db);
}
