import { sql, type Kysely } from 'kysely';

// Frozen in time: this file imports only kysely and never changes once released.
// Plain SQL that PostgreSQL 15 and PGlite (PostgreSQL 17) both accept.

// Many events name no grant or no user (every device code request's device_request.created, an
// app's or an operator's changes), and a B-tree indexes NULLs too: each such event paid for index
// entries that no query reads (the log is looked up by grant or user with an equality, which a
// partial index serves). The code request, a hot path, writes one such event each time.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP INDEX events_grant;
    CREATE INDEX events_grant ON events (grant_id) WHERE grant_id IS NOT NULL;
    DROP INDEX events_user;
    CREATE INDEX events_user ON events (user_id, created_at) WHERE user_id IS NOT NULL;
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP INDEX events_user;
    CREATE INDEX events_user ON events (user_id, created_at);
    DROP INDEX events_grant;
    CREATE INDEX events_grant ON events (grant_id);
  `.execute(db);
}
