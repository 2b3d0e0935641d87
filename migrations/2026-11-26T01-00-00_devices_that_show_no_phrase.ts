import { sql, type Kysely } from 'kysely';

// Frozen in time: this file imports only kysely and never changes once released.
// Plain SQL that PostgreSQL 15 and PGlite (PostgreSQL 17) both accept.

// Stock RFC 8628 clients (oidc-agent, say) never show this server's confirmation phrase. An app's
// registration says whether its devices do (clients.confirmation_phrase, true as before), and a
// request of an app whose devices do not has no phrase and no decoys (both null): its approval
// asks for no phrase. Recorded per request, so a registration changed while a request is pending
// does not change what its approval asks. Adding a column with a constant default and dropping
// NOT NULL rewrite no row.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE clients ADD COLUMN confirmation_phrase boolean NOT NULL DEFAULT true;
    ALTER TABLE device_requests ALTER COLUMN phrase DROP NOT NULL, ALTER COLUMN phrase_choices DROP NOT NULL;
    ALTER TABLE device_requests ADD CONSTRAINT device_requests_phrase_with_its_choices
      CHECK ((phrase IS NULL) = (phrase_choices IS NULL)) NOT VALID;
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DELETE FROM device_requests WHERE phrase IS NULL;
    ALTER TABLE device_requests DROP CONSTRAINT device_requests_phrase_with_its_choices;
    ALTER TABLE device_requests ALTER COLUMN phrase SET NOT NULL, ALTER COLUMN phrase_choices SET NOT NULL;
    ALTER TABLE clients DROP COLUMN confirmation_phrase;
  `.execute(db);
}
