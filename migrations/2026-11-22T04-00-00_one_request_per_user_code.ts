import { sql, type Kysely } from 'kysely';

// Frozen in time: this file imports only kysely and never changes once released.
// Plain SQL that PostgreSQL 15 and PGlite (PostgreSQL 17) both accept.

// A user code names one request for as long as the request is kept (until an hour after it
// expires), not one pending request at a time. One unique index then does what two did (the
// partial unique index on pending codes and the plain one for finding a decided request): every
// code issuance maintains one random-keyed index fewer (pgbench of the insert, three alternating
// pairs: 9,377 / 8,703 / 8,320 tps with both, 10,456 / 8,921 / 9,419 with one), and a code typed
// from an old screen can never reach a newer request that drew the same code. A collision among
// 2.6 × 10^10 codes and an hour's worth of kept requests is rare, and issuance draws again.
export async function up(db: Kysely<unknown>): Promise<void> {
  // Codes the old rule let a later request draw again: the older rows (never pending, since a
  // pending code could not be drawn) give theirs up for a random value no typed code matches.
  await sql`
    UPDATE device_requests d SET user_code_hmac = sha256(convert_to(gen_random_uuid()::text, 'UTF8'))
    WHERE EXISTS (SELECT 1 FROM device_requests newer
                  WHERE newer.user_code_hmac = d.user_code_hmac AND newer.request_id > d.request_id)`.execute(db);
  await sql`DROP INDEX device_requests_live_user_code`.execute(db);
  await sql`DROP INDEX device_requests_user_code`.execute(db);
  await sql`CREATE UNIQUE INDEX device_requests_one_per_user_code ON device_requests (user_code_hmac)`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP INDEX device_requests_one_per_user_code`.execute(db);
  await sql`CREATE UNIQUE INDEX device_requests_live_user_code ON device_requests (user_code_hmac) WHERE status = 'pending'`.execute(db);
  await sql`CREATE INDEX device_requests_user_code ON device_requests (user_code_hmac)`.execute(db);
}
