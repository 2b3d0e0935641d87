import { sql, type Kysely } from 'kysely';

// Frozen in time: this file imports only kysely and never changes once released.
// Plain SQL that PostgreSQL 15 and PGlite (PostgreSQL 17) both accept.

// RFC 7662 §2.1, §4: introspection reveals a token's user and scopes, so only clients registered
// as resource servers may call it, not any confidential client. The web apps that exist today are
// the resource servers; a TV or bot app (a device, not a server) can never be one, and a public
// client could not authenticate the call: the CHECK holds both.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE clients ADD COLUMN introspection_allowed boolean NOT NULL DEFAULT false;
    UPDATE clients SET introspection_allowed = true WHERE kind = 'web' AND type = 'confidential';
    ALTER TABLE clients ADD CONSTRAINT clients_introspection_only_confidential_web
      CHECK (NOT introspection_allowed OR (kind = 'web' AND type = 'confidential'));
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE clients DROP COLUMN introspection_allowed`.execute(db);
}
