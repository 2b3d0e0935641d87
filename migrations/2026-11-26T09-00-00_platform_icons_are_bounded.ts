import { sql, type Kysely } from 'kysely';

// Frozen in time: this file imports only kysely and never changes once released.
// Plain SQL that PostgreSQL 15 and PGlite (PostgreSQL 17) both accept.

// Issue 28 §2: every anonymous device request could name its own icon, and every distinct image
// was stored. Icon storage is now bounded per app and in total: each icon records the app whose
// request stored it and its size, which the bounded insert sums (an index per app keeps that sum
// to the app's own rows). Icons stored before have no app and count only toward the total.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE platform_icons ADD COLUMN client_id text;
    ALTER TABLE platform_icons ADD COLUMN byte_count integer NOT NULL DEFAULT 0;
    UPDATE platform_icons SET byte_count = length(bytes);
    CREATE INDEX platform_icons_client ON platform_icons (client_id) WHERE client_id IS NOT NULL;
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP INDEX platform_icons_client;
    ALTER TABLE platform_icons DROP COLUMN byte_count;
    ALTER TABLE platform_icons DROP COLUMN client_id;
  `.execute(db);
}
