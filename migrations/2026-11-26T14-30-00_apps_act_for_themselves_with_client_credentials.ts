import { sql, type Kysely } from 'kysely';

// Frozen in time: this file imports only kysely and never changes once released.
// Plain SQL that PostgreSQL 15 and PGlite (PostgreSQL 17) both accept.

// Issue 32 §3: an app may be registered for the client_credentials grant (RFC 6749 §4.4) and so
// act for itself, with no user: a Shared Signals receiver managing its streams. Only a
// confidential app can (§4.4: "MUST only be used by confidential clients"), which a CHECK holds.
//
// Its tokens name no user and no grant, so they live in a table of their own rather than in
// access_tokens, whose every reader joins a grant and a user. Only the SHA-256 of each is kept,
// like every other token; an app's tokens go with the app.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE clients DROP CONSTRAINT clients_grant_types_known;
    ALTER TABLE clients ADD CONSTRAINT clients_grant_types_known
      CHECK (grant_types <@ '{urn:ietf:params:oauth:grant-type:device_code,refresh_token,authorization_code,client_credentials}'::text[]);
    ALTER TABLE clients ADD CONSTRAINT clients_client_credentials_are_confidential
      CHECK (type = 'confidential' OR NOT ('client_credentials' = ANY (grant_types)));

    CREATE TABLE app_access_tokens (
      token_hash bytea PRIMARY KEY CHECK (length(token_hash) = 32),
      client_id  text NOT NULL REFERENCES clients (client_id) ON DELETE CASCADE,
      scopes     text[] NOT NULL CHECK (cardinality(scopes) BETWEEN 1 AND 16),
      created_at timestamptz NOT NULL,
      expires_at timestamptz NOT NULL
    );
    CREATE INDEX app_access_tokens_client ON app_access_tokens (client_id);
    CREATE INDEX app_access_tokens_expires_at ON app_access_tokens (expires_at);
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP TABLE app_access_tokens;
    ALTER TABLE clients DROP CONSTRAINT clients_client_credentials_are_confidential;
    UPDATE clients SET grant_types = array_remove(grant_types, 'client_credentials') WHERE 'client_credentials' = ANY (grant_types);
    ALTER TABLE clients DROP CONSTRAINT clients_grant_types_known;
    ALTER TABLE clients ADD CONSTRAINT clients_grant_types_known
      CHECK (grant_types <@ '{urn:ietf:params:oauth:grant-type:device_code,refresh_token,authorization_code}'::text[]);
  `.execute(db);
}
