import { sql, type Kysely } from 'kysely';

// Frozen in time: imports only kysely.
//
// device_links: every refresh touches its chain's link (last use, expiry, scopes), none of them
// indexed columns; with room left on the page the new row version stays there (a HOT update) and
// neither index of the table is written. Measured with pgbench on the benchmark's data: at the
// default fillfactor 100 fewer than one link update in five was HOT.
//
// device_requests: the index on expires_at served only the purge, and every device code paid for
// it. Request ids grow with time and every request lives the same DEVICE_CODE_TTL, so the purge
// walks the primary key from the oldest row instead and finds the expired rows first.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE device_links SET (fillfactor = 80);
    DROP INDEX device_requests_expires_at;
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE INDEX device_requests_expires_at ON device_requests (expires_at);
    ALTER TABLE device_links RESET (fillfactor);
  `.execute(db);
}
