import { sql, type Kysely } from 'kysely';

// Frozen in time: this file imports only kysely and never changes once released.
// Plain SQL that PostgreSQL 15 and PGlite (PostgreSQL 17) both accept.

// An app's own token (the client_credentials grant) may be bound to a DPoP key (RFC 9449), as a
// user's access token may: an app registered to use DPoP sends a proof with every token request,
// and so can be a Shared Signals receiver only with a bound token. The key is named by its JWK
// thumbprint, as everywhere else; nullable without a default, so adding it rewrites no row.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE app_access_tokens ADD COLUMN dpop_jkt text`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE app_access_tokens DROP COLUMN dpop_jkt`.execute(db);
}
