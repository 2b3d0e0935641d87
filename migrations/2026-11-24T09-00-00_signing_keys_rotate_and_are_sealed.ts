import { sql, type Kysely } from 'kysely';

// Frozen in time: this file imports only kysely and never changes once released.
// Plain SQL that PostgreSQL 15 and PGlite (PostgreSQL 17) both accept.

// Signing keys move next -> active -> retired by their timestamps alone, so that every instance
// reading the same rows agrees, from its own clock, which key signs: a key signs from activates_at
// (null: a next key, published but not yet scheduled) until retired_at, and is published until
// ID_TOKEN_TTL after it. revoked_at takes it out of both at once.
//
// Private keys and server secrets are sealed (AES-256-GCM) under a key-encryption key from the
// environment, which this migration cannot know: the clear columns stay, nullable, and the
// server seals whatever it finds in them at its next start (then empties them). A key already in
// use keeps signing: its activates_at is when it was made.
//
// Every change to a key is announced on commit, as client changes are, so that every instance
// reloads the ring at once (a rotation scheduled ahead, an emergency revocation).
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE signing_keys
      ADD COLUMN activates_at timestamptz,
      ADD COLUMN revoked_at timestamptz,
      ADD COLUMN private_key_sealed bytea,
      ALTER COLUMN private_jwk DROP NOT NULL;
    UPDATE signing_keys SET activates_at = created_at;

    ALTER TABLE server_secrets
      ADD COLUMN sealed_value bytea,
      ALTER COLUMN value DROP NOT NULL;
    ALTER TABLE server_secrets
      ADD CONSTRAINT server_secrets_one_value CHECK (num_nonnulls(value, sealed_value) = 1);

    CREATE FUNCTION announce_signing_key_change() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      PERFORM pg_notify('device_auth_signing_keys', COALESCE(NEW.kid, OLD.kid));
      RETURN NULL;
    END
    $$;

    CREATE TRIGGER signing_key_changes_are_announced
      AFTER INSERT OR UPDATE OR DELETE ON signing_keys
      FOR EACH ROW EXECUTE FUNCTION announce_signing_key_change();
  `.execute(db);
}

// Down keeps only what can be read without the key: sealed rows have no clear form to go back to,
// so going down needs a database that never started after going up, or a new key after it.
export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP TRIGGER signing_key_changes_are_announced ON signing_keys;
    DROP FUNCTION announce_signing_key_change();
    DELETE FROM signing_keys WHERE private_jwk IS NULL;
    ALTER TABLE signing_keys
      DROP COLUMN activates_at,
      DROP COLUMN revoked_at,
      DROP COLUMN private_key_sealed,
      ALTER COLUMN private_jwk SET NOT NULL;
    DELETE FROM server_secrets WHERE value IS NULL;
    ALTER TABLE server_secrets
      DROP CONSTRAINT server_secrets_one_value,
      DROP COLUMN sealed_value,
      ALTER COLUMN value SET NOT NULL;
  `.execute(db);
}
