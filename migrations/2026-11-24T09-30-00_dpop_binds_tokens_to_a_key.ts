import { sql, type Kysely } from 'kysely';

// Frozen in time: this file imports only kysely and never changes once released.
// Plain SQL that PostgreSQL 15 and PGlite (PostgreSQL 17) both accept.

// DPoP (RFC 9449). A key is named by its JWK thumbprint (RFC 7638, SHA-256, base64url: 43
// characters), its "jkt". A device request or authorization code may be bound to a key before
// any token exists; a grant bound to a key keeps it for life, and each access token carries its
// grant's (or, for an unbound grant, its own request's) key so that userinfo and introspection
// read it without joining the grant. Every column is nullable without a default: adding it
// rewrites no row.
//
// clients.require_dpop is RFC 9449 §5.2's dpop_bound_access_tokens: such an app gets tokens only
// with a proof.
//
// dpop_proofs remembers each accepted proof (SHA-256 of its key and jti) until no clock could
// accept it again, so that a proof is used once across every instance: the insert that records it
// is the check (ON CONFLICT DO NOTHING). The purge removes expired rows.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE device_requests ADD COLUMN dpop_jkt text;
    ALTER TABLE authorization_codes ADD COLUMN dpop_jkt text;
    ALTER TABLE grants ADD COLUMN dpop_jkt text;
    ALTER TABLE access_tokens ADD COLUMN dpop_jkt text;
    ALTER TABLE clients ADD COLUMN require_dpop boolean NOT NULL DEFAULT false;

    CREATE TABLE dpop_proofs (
      proof_hash bytea PRIMARY KEY,
      expires_at timestamptz NOT NULL
    );
    CREATE INDEX dpop_proofs_by_expiry ON dpop_proofs (expires_at);
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP TABLE dpop_proofs;
    ALTER TABLE clients DROP COLUMN require_dpop;
    ALTER TABLE access_tokens DROP COLUMN dpop_jkt;
    ALTER TABLE grants DROP COLUMN dpop_jkt;
    ALTER TABLE authorization_codes DROP COLUMN dpop_jkt;
    ALTER TABLE device_requests DROP COLUMN dpop_jkt;
  `.execute(db);
}
