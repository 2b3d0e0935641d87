import { sql, type Kysely } from 'kysely';

// Frozen in time: this file imports only kysely and never changes once released.
// Plain SQL that PostgreSQL 15 and PGlite (PostgreSQL 17) both accept.

// A foreign key from device_requests to clients made every code issuance lock its app's row
// (FOR KEY SHARE). One TV app issues codes for all its devices, so concurrent issuances piled
// their locks onto one row: each new locker writes a MultiXact and a lock record to the WAL. On
// the benchmark's code issuance that was about 0.02 ms of PostgreSQL CPU and 125 bytes of WAL per
// request, a seventh of the database's work (npm run bench -- --only code, with and without it).
//
// What the key guarded is kept without the lock. The issuing INSERT reads the app in the same
// statement and inserts nothing for a missing or disabled one; every read of a request joins its
// app, so a request whose app is gone is never shown, polled or approved; and deleting an app
// still deletes its requests, by the trigger below. An issuance racing the app's deletion can
// leave a request behind that the trigger did not see: invisible, and purged with the expired.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE device_requests DROP CONSTRAINT device_requests_client_id_fkey;

    CREATE FUNCTION delete_device_requests_of_deleted_clients() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      DELETE FROM device_requests d USING deleted_clients c WHERE d.client_id = c.client_id;
      RETURN NULL;
    END
    $$;

    CREATE TRIGGER clients_delete_their_device_requests
      AFTER DELETE ON clients REFERENCING OLD TABLE AS deleted_clients
      FOR EACH STATEMENT EXECUTE FUNCTION delete_device_requests_of_deleted_clients();
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP TRIGGER clients_delete_their_device_requests ON clients;
    DROP FUNCTION delete_device_requests_of_deleted_clients();
    DELETE FROM device_requests d WHERE NOT EXISTS (SELECT 1 FROM clients c WHERE c.client_id = d.client_id);
    ALTER TABLE device_requests ADD CONSTRAINT device_requests_client_id_fkey
      FOREIGN KEY (client_id) REFERENCES clients (client_id) ON DELETE CASCADE;
  `.execute(db);
}
