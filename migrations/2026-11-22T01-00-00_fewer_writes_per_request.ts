import { sql, type Kysely } from 'kysely';

// Frozen in time: imports only kysely.
//
// device_links: every refresh touches its chain's link (last use, expiry, scopes), none of them
// indexed columns; with room left on the page the new row version stays there (a HOT update) and
// neither index of the table is written. Measured with pgbench on the benchmark's data: at the
// default fillfactor 100 fewer than one link update in five was HOT.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE device_links SET (fillfactor = 80)`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE device_links RESET (fillfactor)`.execute(db);
}
