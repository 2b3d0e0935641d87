import { sql, type Kysely } from 'kysely';

// Frozen in time: this file imports only kysely and never changes once released.
// Plain SQL that PostgreSQL 15 and PGlite (PostgreSQL 17) both accept.

// Device-code phishing: the approval page must say where and when a request came from, and the
// Devices page where each device signed in and was last used from. A request keeps its
// requester's address and user agent only as long as the request itself (the purge deletes both);
// a chain keeps the address it signed in from and the one it was last used from.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE device_requests ADD COLUMN requester_ip text;
    ALTER TABLE device_requests ADD COLUMN requester_user_agent text;
    ALTER TABLE device_links ADD COLUMN signed_in_ip text;
    ALTER TABLE device_links ADD COLUMN last_used_ip text;
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE device_requests DROP COLUMN requester_ip;
    ALTER TABLE device_requests DROP COLUMN requester_user_agent;
    ALTER TABLE device_links DROP COLUMN signed_in_ip;
    ALTER TABLE device_links DROP COLUMN last_used_ip;
  `.execute(db);
}
