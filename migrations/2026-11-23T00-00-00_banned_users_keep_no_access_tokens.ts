import { sql, type Kysely } from 'kysely';

// Frozen in time: this file imports only kysely and never changes once released.
// Plain SQL that PostgreSQL 15 and PGlite (PostgreSQL 17) both accept.

// A live access token is now one that is stored, unexpired and of an enabled app: the check no
// longer reads the user's row. A ban already deleted its user's access tokens (it revokes every
// chain); issuance now takes a share lock on the user, so none can appear across a ban. Tokens
// that an issuance racing a ban left before this release would come back to life under the new
// rule, so they go here.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    DELETE FROM access_tokens a USING users u
    WHERE u.user_id = a.user_id AND u.banned_at IS NOT NULL`.execute(db);
}

// The tokens deleted on the way up were dead under the old rule; nothing needs them back.
export async function down(): Promise<void> {}
