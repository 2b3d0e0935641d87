import { sql, type Kysely } from 'kysely';

// Frozen in time: this file imports only kysely and never changes once released.
// Plain SQL that PostgreSQL 15 and PGlite (PostgreSQL 17) both accept.

// OpenID Connect RP-Initiated Logout 1.0 §3.1: where the end-session endpoint may send a browser
// back after signing out, registered per app and compared exactly, like redirect_uris. A default
// of the empty array: existing apps have none, and adding it rewrites no row.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE clients ADD COLUMN post_logout_redirect_uris text[] NOT NULL DEFAULT '{}'`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE clients DROP COLUMN post_logout_redirect_uris`.execute(db);
}
