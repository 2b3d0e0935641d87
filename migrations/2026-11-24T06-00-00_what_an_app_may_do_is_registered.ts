import { sql, type Kysely } from 'kysely';

// Frozen in time: this file imports only kysely and never changes once released.
// Plain SQL that PostgreSQL 15 and PGlite (PostgreSQL 17) both accept.

// What an app may do is part of its registration (RFC 7591 §2: grant_types, redirect_uris), not
// a consequence of its kind. Every existing app keeps exactly what it could do: TV / device apps
// and bots use the device grant and get refresh tokens (the refresh_token grant); web apps use
// the device grant without them. A row written without saying gets nothing.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE clients ADD COLUMN grant_types text[] NOT NULL DEFAULT '{}';
    ALTER TABLE clients ADD COLUMN redirect_uris text[] NOT NULL DEFAULT '{}';
    UPDATE clients SET grant_types = CASE
      WHEN kind IN ('tv', 'bot') THEN '{urn:ietf:params:oauth:grant-type:device_code,refresh_token}'::text[]
      ELSE '{urn:ietf:params:oauth:grant-type:device_code}'::text[]
    END;
    ALTER TABLE clients ADD CONSTRAINT clients_grant_types_known
      CHECK (grant_types <@ '{urn:ietf:params:oauth:grant-type:device_code,refresh_token,authorization_code}'::text[]);
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE clients DROP CONSTRAINT clients_grant_types_known;
    ALTER TABLE clients DROP COLUMN redirect_uris;
    ALTER TABLE clients DROP COLUMN grant_types;
  `.execute(db);
}
