import { sql, type Kysely } from 'kysely';

// Frozen in time: this file imports only kysely and never changes once released.
// Plain SQL that PostgreSQL 15 and PGlite (PostgreSQL 17) both accept.

// A chain's current refresh token is named by its link (device_links.current_refresh_hash) rather
// than by marking every older token replaced. One column holds one value, so "one current token
// per chain" needs no partial unique index, and a rotation is one HOT update of the link (which
// it already made for last use and expiry) instead of also a non-HOT update of the old token's
// row: pgbench on the benchmark's data found that index alone cost 20-25% of a rotation.
// refresh_tokens keeps every token the chain was given, so an old one presented again is still
// recognised as the chain's and revokes it.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE device_links ADD COLUMN current_refresh_hash bytea`.execute(db);
  await sql`
    UPDATE device_links l SET current_refresh_hash = r.token_hash
    FROM refresh_tokens r
    WHERE r.link_id = l.link_id AND r.replaced_at IS NULL`.execute(db);
  await sql`DROP INDEX refresh_tokens_one_current_per_link`.execute(db);
  await sql`ALTER TABLE refresh_tokens DROP COLUMN replaced_at`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE refresh_tokens ADD COLUMN replaced_at timestamptz`.execute(db);
  // When a token was replaced is not kept; its successor's creation is the closest record.
  await sql`
    UPDATE refresh_tokens r SET replaced_at = coalesce(
      (SELECT min(s.created_at) FROM refresh_tokens s WHERE s.link_id = r.link_id AND s.created_at > r.created_at), r.created_at)
    WHERE NOT EXISTS (SELECT 1 FROM device_links l WHERE l.link_id = r.link_id AND l.current_refresh_hash = r.token_hash)`.execute(db);
  await sql`CREATE UNIQUE INDEX refresh_tokens_one_current_per_link ON refresh_tokens (link_id) WHERE replaced_at IS NULL`.execute(db);
  await sql`ALTER TABLE device_links DROP COLUMN current_refresh_hash`.execute(db);
}
