import { sql, type Kysely } from 'kysely';

// Frozen in time: this file imports only kysely and never changes once released.
// Plain SQL that PostgreSQL 15 and PGlite (PostgreSQL 17) both accept.

// Every statement that adds a chain's row (a refresh token, an access token, an event) first
// writes the chain's link in the same transaction: a redemption inserts it, a rotation and a
// revocation update it. The link is then certain to exist and is locked until commit, and the
// foreign keys from those rows only looked it up again: on each rotation, three more probes of
// device_links' primary key and heap, more than a quarter of the pages the rotation read, and the
// part that grew most with the number of chains (each probe descends one more index level at
// 1,000,000 chains than at 20,000).
//
// Deleting a link still deletes its rows, by the trigger below, as the keys' ON DELETE CASCADE
// did. A deletion (the purge of ended chains, or a cascade from a deleted user or app) that meets
// a link being written waits for the writer's lock; the trigger's statements then see what the
// writer added, so no row outlives its link.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE refresh_tokens DROP CONSTRAINT refresh_tokens_link_id_fkey;
    ALTER TABLE access_tokens DROP CONSTRAINT access_tokens_link_id_fkey;
    ALTER TABLE link_events DROP CONSTRAINT link_events_link_id_fkey;

    CREATE FUNCTION delete_rows_of_deleted_links() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      DELETE FROM refresh_tokens r USING deleted_links d WHERE r.link_id = d.link_id;
      DELETE FROM access_tokens a USING deleted_links d WHERE a.link_id = d.link_id;
      DELETE FROM link_events e USING deleted_links d WHERE e.link_id = d.link_id;
      RETURN NULL;
    END
    $$;

    CREATE TRIGGER device_links_delete_their_rows
      AFTER DELETE ON device_links REFERENCING OLD TABLE AS deleted_links
      FOR EACH STATEMENT EXECUTE FUNCTION delete_rows_of_deleted_links();
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP TRIGGER device_links_delete_their_rows ON device_links;
    DROP FUNCTION delete_rows_of_deleted_links();
    DELETE FROM refresh_tokens r WHERE NOT EXISTS (SELECT 1 FROM device_links l WHERE l.link_id = r.link_id);
    DELETE FROM access_tokens a WHERE NOT EXISTS (SELECT 1 FROM device_links l WHERE l.link_id = a.link_id);
    DELETE FROM link_events e WHERE NOT EXISTS (SELECT 1 FROM device_links l WHERE l.link_id = e.link_id);
    ALTER TABLE refresh_tokens ADD CONSTRAINT refresh_tokens_link_id_fkey
      FOREIGN KEY (link_id) REFERENCES device_links (link_id) ON DELETE CASCADE;
    ALTER TABLE access_tokens ADD CONSTRAINT access_tokens_link_id_fkey
      FOREIGN KEY (link_id) REFERENCES device_links (link_id) ON DELETE CASCADE;
    ALTER TABLE link_events ADD CONSTRAINT link_events_link_id_fkey
      FOREIGN KEY (link_id) REFERENCES device_links (link_id) ON DELETE CASCADE;
  `.execute(db);
}
