import { sql } from 'kysely';
import type { Database } from '../db/connect.js';
import { deleteUpTo } from './purge.js';

export interface NewPlatformIcon {
  sha256: Buffer;
  contentType: string;
  bytes: Buffer;
}

/** Stores an icon once however many requests send it; storing it again only marks it used. */
export async function storePlatformIcon(db: Database, icon: NewPlatformIcon, now: Date): Promise<void> {
  await db
    .insertInto('platform_icons')
    .values({ sha256: icon.sha256, content_type: icon.contentType, bytes: icon.bytes, created_at: now, last_used_at: now })
    .onConflict((oc) => oc.column('sha256').doUpdateSet({ last_used_at: now }))
    .execute();
}

/**
 * Names a stored icon on a request, and marks the icon used in the same statement, so the purge
 * (which spares recently used icons) cannot delete it between the two. Returns false when the
 * icon is no longer stored: the caller fetches it again. A request that is gone changes nothing.
 */
export async function giveIconToRequest(db: Database, requestId: string, sha256: Buffer, now: Date): Promise<boolean> {
  const result = await sql<{ icon_kept: boolean }>`
    WITH icon AS (
      UPDATE platform_icons SET last_used_at = ${now} WHERE sha256 = ${sha256} RETURNING sha256
    ), request AS (
      UPDATE device_requests d SET platform_icon_sha256 = icon.sha256 FROM icon WHERE d.request_id = ${requestId}::bigint RETURNING d.request_id
    )
    SELECT EXISTS (SELECT 1 FROM icon) AS icon_kept`.execute(db);
  return result.rows[0]?.icon_kept === true;
}

export async function findPlatformIcon(db: Database, sha256: Buffer) {
  return db.selectFrom('platform_icons').select(['content_type', 'bytes']).where('sha256', '=', sha256).executeTakeFirst();
}

/**
 * Icons no request or grant names, and nobody was given since `before`. Recently used icons are
 * spared because a request may be about to be given one (giveIconToRequest marks it first).
 */
export const deleteUnusedPlatformIcons = (db: Database, before: Date, limit: number) =>
  deleteUpTo(
    db,
    'platform_icons',
    'sha256',
    sql<boolean>`last_used_at < ${before}
      AND NOT EXISTS (SELECT 1 FROM device_requests d WHERE d.platform_icon_sha256 = platform_icons.sha256)
      AND NOT EXISTS (SELECT 1 FROM grants g WHERE g.platform_icon_sha256 = platform_icons.sha256)`,
    limit,
  );
