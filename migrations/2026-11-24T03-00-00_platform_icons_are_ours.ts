import { sql, type Kysely } from 'kysely';

// Frozen in time: this file imports only kysely and never changes once released.
// Plain SQL that PostgreSQL 15 and PGlite (PostgreSQL 17) both accept.

// A device's platform icon was an <img> pointing at the device's own host, so whoever sent the
// URL learned each viewer's address, browser and the moment they looked. The server now fetches
// the icon once and serves it from its own origin: the images are stored here, named by the
// SHA-256 of their bytes (one row however many requests send the same picture), and requests and
// links name the one they show.
//
// last_used_at is set whenever a request is given the icon: the purge deletes an icon nothing
// names only once it has not been given to anyone for a while, so an icon about to be named
// (stored a moment ago, or remembered for its URL) is never deleted under the writer.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE platform_icons (
      sha256       bytea PRIMARY KEY CHECK (length(sha256) = 32),
      content_type text NOT NULL CHECK (content_type IN ('image/png', 'image/jpeg', 'image/gif', 'image/webp', 'image/x-icon')),
      bytes        bytea NOT NULL CHECK (length(bytes) BETWEEN 1 AND 65536),
      created_at   timestamptz NOT NULL,
      last_used_at timestamptz NOT NULL
    );

    -- No foreign keys: an icon is named by many requests at once, and a key check would lock its
    -- one row for each of them. The purge's NOT EXISTS reads these partial indexes instead; rows
    -- without an icon are not in them, and no poll or rotation changes the column, so those
    -- updates stay HOT.
    ALTER TABLE device_requests ADD COLUMN platform_icon_sha256 bytea;
    ALTER TABLE device_links ADD COLUMN platform_icon_sha256 bytea;
    CREATE INDEX device_requests_platform_icon ON device_requests (platform_icon_sha256) WHERE platform_icon_sha256 IS NOT NULL;
    CREATE INDEX device_links_platform_icon ON device_links (platform_icon_sha256) WHERE platform_icon_sha256 IS NOT NULL;
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP INDEX device_links_platform_icon;
    DROP INDEX device_requests_platform_icon;
    ALTER TABLE device_links DROP COLUMN platform_icon_sha256;
    ALTER TABLE device_requests DROP COLUMN platform_icon_sha256;
    DROP TABLE platform_icons;
  `.execute(db);
}
