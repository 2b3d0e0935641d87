import { sql, type Kysely } from 'kysely';

// Frozen in time: this file imports only kysely and never changes once released.
// Plain SQL that PostgreSQL 15 and PGlite (PostgreSQL 17) both accept.

// What a user gives an app, with the device's details when it has them, was called a device
// link, a chain, a sign-in and a device: it is a grant. The tables, columns, indexes and
// constraints take that name. Only names change, in one transaction: every row stays, so every
// issued access and refresh token goes on working. The trigger that deletes a grant's rows with
// it names the old columns in its body, so it is made anew, doing the same under the new names.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP TRIGGER device_links_delete_their_rows ON device_links;
    DROP FUNCTION delete_rows_of_deleted_links();

    ALTER TABLE device_links RENAME TO grants;
    ALTER TABLE grants RENAME COLUMN link_id TO grant_id;
    ALTER TABLE grants RENAME CONSTRAINT device_links_pkey TO grants_pkey;
    ALTER TABLE grants RENAME CONSTRAINT device_links_user_id_fkey TO grants_user_id_fkey;
    ALTER TABLE grants RENAME CONSTRAINT device_links_client_id_fkey TO grants_client_id_fkey;
    ALTER INDEX device_links_live_by_user RENAME TO grants_live_by_user;
    ALTER INDEX device_links_platform_icon RENAME TO grants_platform_icon;

    ALTER TABLE link_events RENAME TO grant_events;
    ALTER TABLE grant_events RENAME COLUMN link_id TO grant_id;
    ALTER TABLE grant_events RENAME CONSTRAINT link_events_pkey TO grant_events_pkey;
    ALTER INDEX link_events_user RENAME TO grant_events_user;
    ALTER INDEX link_events_link RENAME TO grant_events_grant;
    ALTER SEQUENCE link_events_event_id_seq RENAME TO grant_events_event_id_seq;

    ALTER TABLE refresh_tokens RENAME COLUMN link_id TO grant_id;
    ALTER INDEX refresh_tokens_link RENAME TO refresh_tokens_grant;

    ALTER TABLE access_tokens RENAME COLUMN link_id TO grant_id;
    ALTER INDEX access_tokens_link RENAME TO access_tokens_grant;

    ALTER TABLE device_requests RENAME COLUMN link_id TO grant_id;
    ALTER TABLE device_requests RENAME CONSTRAINT device_requests_link_id_fkey TO device_requests_grant_id_fkey;

    CREATE FUNCTION delete_rows_of_deleted_grants() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      DELETE FROM refresh_tokens r USING deleted_grants d WHERE r.grant_id = d.grant_id;
      DELETE FROM access_tokens a USING deleted_grants d WHERE a.grant_id = d.grant_id;
      DELETE FROM grant_events e USING deleted_grants d WHERE e.grant_id = d.grant_id;
      RETURN NULL;
    END
    $$;

    CREATE TRIGGER grants_delete_their_rows
      AFTER DELETE ON grants REFERENCING OLD TABLE AS deleted_grants
      FOR EACH STATEMENT EXECUTE FUNCTION delete_rows_of_deleted_grants();
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP TRIGGER grants_delete_their_rows ON grants;
    DROP FUNCTION delete_rows_of_deleted_grants();

    ALTER TABLE device_requests RENAME CONSTRAINT device_requests_grant_id_fkey TO device_requests_link_id_fkey;
    ALTER TABLE device_requests RENAME COLUMN grant_id TO link_id;

    ALTER INDEX access_tokens_grant RENAME TO access_tokens_link;
    ALTER TABLE access_tokens RENAME COLUMN grant_id TO link_id;

    ALTER INDEX refresh_tokens_grant RENAME TO refresh_tokens_link;
    ALTER TABLE refresh_tokens RENAME COLUMN grant_id TO link_id;

    ALTER SEQUENCE grant_events_event_id_seq RENAME TO link_events_event_id_seq;
    ALTER INDEX grant_events_grant RENAME TO link_events_link;
    ALTER INDEX grant_events_user RENAME TO link_events_user;
    ALTER TABLE grant_events RENAME CONSTRAINT grant_events_pkey TO link_events_pkey;
    ALTER TABLE grant_events RENAME COLUMN grant_id TO link_id;
    ALTER TABLE grant_events RENAME TO link_events;

    ALTER INDEX grants_platform_icon RENAME TO device_links_platform_icon;
    ALTER INDEX grants_live_by_user RENAME TO device_links_live_by_user;
    ALTER TABLE grants RENAME CONSTRAINT grants_client_id_fkey TO device_links_client_id_fkey;
    ALTER TABLE grants RENAME CONSTRAINT grants_user_id_fkey TO device_links_user_id_fkey;
    ALTER TABLE grants RENAME CONSTRAINT grants_pkey TO device_links_pkey;
    ALTER TABLE grants RENAME COLUMN grant_id TO link_id;
    ALTER TABLE grants RENAME TO device_links;

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
