import { sql, type Kysely } from 'kysely';

// Frozen in time: this file imports only kysely and never changes once released.
// Plain SQL that PostgreSQL 15 and PGlite (PostgreSQL 17) both accept.

// A rotated client secret may stay valid for a grace period the operator chooses, so an app's
// instances can be given the new secret one by one: the replaced secret's hash is kept until then.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE clients ADD COLUMN previous_secret_hash bytea;
    ALTER TABLE clients ADD COLUMN previous_secret_expires_at timestamptz;
    ALTER TABLE clients ADD CONSTRAINT clients_previous_secret_has_an_end
      CHECK ((previous_secret_hash IS NULL) = (previous_secret_expires_at IS NULL));
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE clients DROP COLUMN previous_secret_hash;
    ALTER TABLE clients DROP COLUMN previous_secret_expires_at;
  `.execute(db);
}
