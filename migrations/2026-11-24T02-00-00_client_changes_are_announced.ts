import { sql, type Kysely } from 'kysely';

// Frozen in time: this file imports only kysely and never changes once released.
// Plain SQL that PostgreSQL 15 and PGlite (PostgreSQL 17) both accept.

// Each instance keeps what it read of a client in memory. Every update or deletion of a client
// row, by whoever makes it (an instance, the CLI, psql), names the client on the channel the
// instances listen to, so that each forgets it and reads the new row at its next request. A
// trigger rather than the application's own call: no writer can forget it. pg_notify is
// delivered only when the transaction commits, never if it rolls back, and the old id is what an
// instance holds (a new id names no row any instance could have read before).
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE FUNCTION announce_client_change() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      PERFORM pg_notify('device_auth_client_changes', OLD.client_id);
      RETURN NULL;
    END
    $$;

    CREATE TRIGGER clients_changes_are_announced
      AFTER UPDATE OR DELETE ON clients
      FOR EACH ROW EXECUTE FUNCTION announce_client_change();
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP TRIGGER clients_changes_are_announced ON clients;
    DROP FUNCTION announce_client_change();
  `.execute(db);
}
