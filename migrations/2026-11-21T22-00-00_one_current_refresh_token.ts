import { sql, type Kysely } from 'kysely';

// Frozen in time: this file imports only kysely and never changes once released.
// Plain SQL that PostgreSQL 15 and PGlite (PostgreSQL 17) both accept.

// A chain has at most one current refresh token. Rotation already guarantees it (the presented
// token is replaced only while current); this makes two live successors impossible even for a bug.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`CREATE UNIQUE INDEX refresh_tokens_one_current_per_link ON refresh_tokens (link_id) WHERE replaced_at IS NULL`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP INDEX refresh_tokens_one_current_per_link`.execute(db);
}
