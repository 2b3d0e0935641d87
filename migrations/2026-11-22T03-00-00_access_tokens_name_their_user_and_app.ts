import { sql, type Kysely } from 'kysely';

// Frozen in time: this file imports only kysely and never changes once released.
// Plain SQL that PostgreSQL 15 and PGlite (PostgreSQL 17) both accept.

// An access token names its chain's user and app (both fixed for a chain's life), and revoking a
// chain deletes its access tokens in the same transaction. A live-token check (introspection,
// userinfo) then reads the token, its user and its app, and no longer the chain's wide
// device_links row: at 1,000,000 chains that row was half of what the check read, a working set
// of about 570 MB against about 270 MB now.
// No foreign keys on the copies: link_id already ties the token to its chain (and cascades), and
// a key check on users would lock the user's row on every refresh.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE access_tokens ADD COLUMN user_id uuid, ADD COLUMN client_id text`.execute(db);
  // Tokens of chains revoked before this migration: the rule that made them dead goes away.
  await sql`
    DELETE FROM access_tokens a USING device_links l
    WHERE l.link_id = a.link_id AND l.revoked_at IS NOT NULL`.execute(db);
  await sql`
    UPDATE access_tokens a SET user_id = l.user_id, client_id = l.client_id
    FROM device_links l WHERE l.link_id = a.link_id`.execute(db);
  await sql`ALTER TABLE access_tokens ALTER COLUMN user_id SET NOT NULL, ALTER COLUMN client_id SET NOT NULL`.execute(db);
}

// The tokens deleted on the way up were dead; nothing needs them back.
export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE access_tokens DROP COLUMN user_id, DROP COLUMN client_id`.execute(db);
}
