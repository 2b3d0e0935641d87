import { sql, type Kysely } from 'kysely';

// Frozen in time: imports only kysely.
//
// A poll becomes one plain UPDATE: whether it came too soon is computed from the row's previous
// values in SET (where they are still visible) and kept in the row, so RETURNING can report it
// without a locking sub-select first.
//
// Every pending request is rewritten on every poll (about 120 times in its 10 minutes). None of the
// columns a poll writes is indexed, so with free room on the page the new row version stays there
// (a HOT update) and no index is touched; a fillfactor of 80 keeps that room.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE device_requests ADD COLUMN last_poll_too_fast boolean NOT NULL DEFAULT false;
    ALTER TABLE device_requests SET (fillfactor = 80);
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE device_requests RESET (fillfactor);
    ALTER TABLE device_requests DROP COLUMN last_poll_too_fast;
  `.execute(db);
}
