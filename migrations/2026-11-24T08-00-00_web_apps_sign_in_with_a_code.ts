import { sql, type Kysely } from 'kysely';

// Frozen in time: this file imports only kysely and never changes once released.
// Plain SQL that PostgreSQL 15 and PGlite (PostgreSQL 17) both accept.

// The authorization-code grant (OAuth 2.1 §4.1). A code is stored only as its SHA-256 hash, bound
// to its app, redirect URI and PKCE challenge, and redeemed once: redeemed_at is set by the one
// statement that redeems it, and grant_id names the grant it created, so that a second redemption
// can revoke what the first one issued (RFC 6749 §4.1.2). Codes live minutes; the purge removes
// them an hour after they expire.
//
// A consent is what a user agreed to share with a web app: one row per user and app, holding the
// scopes agreed to so far. A request within them is not asked again; Remove access deletes it.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE authorization_codes (
      code_hash      bytea PRIMARY KEY,
      client_id      text NOT NULL REFERENCES clients (client_id) ON DELETE CASCADE,
      user_id        uuid NOT NULL REFERENCES users (user_id) ON DELETE CASCADE,
      redirect_uri   text NOT NULL,
      scopes         text[] NOT NULL,
      code_challenge text NOT NULL,
      nonce          text,
      auth_time      timestamptz NOT NULL,
      created_at     timestamptz NOT NULL,
      expires_at     timestamptz NOT NULL,
      redeemed_at    timestamptz,
      grant_id       uuid
    );
    CREATE INDEX authorization_codes_by_expiry ON authorization_codes (expires_at);

    CREATE TABLE consents (
      user_id    uuid NOT NULL REFERENCES users (user_id) ON DELETE CASCADE,
      client_id  text NOT NULL REFERENCES clients (client_id) ON DELETE CASCADE,
      scopes     text[] NOT NULL,
      granted_at timestamptz NOT NULL,
      PRIMARY KEY (user_id, client_id)
    );
    CREATE INDEX consents_by_client ON consents (client_id);
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP TABLE consents;
    DROP TABLE authorization_codes;
  `.execute(db);
}
