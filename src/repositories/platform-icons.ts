import { sql } from 'kysely';
import type { Database } from '../db/connect.js';
import { deleteUpTo } from './purge.js';

export interface NewPlatformIcon {
  sha256: Buffer;
  contentType: string;
  bytes: Buffer;
}

/**
 * Stores an icon once however many requests send it; storing it again only marks it used. A new
 * icon is stored only while the app's icons and all icons stay within their bounds (bytes);
 * false when it was not. Concurrent stores may pass a bound by what is being fetched at once.
 */
export async function storePlatformIcon(
  db: Database,
  icon: NewPlatformIcon,
  clientId: string,
  bounds: { perApp: number; total: number },
  now: Date,
): Promise<boolean> {
  const known = await db.updateTable('platform_icons').set({ last_used_at: now }).where('sha256', '=', icon.sha256).returning('sha256').executeTakeFirst();
  if (known) return true;
  const size = icon.bytes.length;
  const stored = await sql<{ stored: number }>`
    INSERT INTO platform_icons (sha256, content_type, bytes, byte_count, client_id, created_at, last_used_at)
    SELECT ${icon.sha256}, ${icon.contentType}, ${icon.bytes}, ${size}::integer, ${clientId}::text, ${now}::timestamptz, ${now}::timestamptz
    WHERE (SELECT coalesce(sum(byte_count), 0) FROM platform_icons WHERE client_id = ${clientId}::text) + ${size} <= ${bounds.perApp}
      AND (SELECT coalesce(sum(byte_count), 0) FROM platform_icons) + ${size} <= ${bounds.total}
    ON CONFLICT (sha256) DO UPDATE SET last_used_at = EXCLUDED.last_used_at
    RETURNING 1 AS stored`.execute(db);
  return stored.rows.length === 1;
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
 * Icons no live request (pending or approved, not expired) or live grant (not revoked) names, and
 * nobody was given since `before`: a denied, redeemed or expired request, or an ended grant, keeps
 * no icon (issue 28 §2). Recently used icons are spared because a request may be about to be
 * given one (giveIconToRequest marks it first).
 */
export const deleteUnusedPlatformIcons = (db: Database, now: Date, before: Date, limit: number) =>
  deleteUpTo(
    db,
    'platform_icons',
    'sha256',
    sql<boolean>`last_used_at < ${before}
      AND NOT EXISTS (SELECT 1 FROM device_requests d WHERE d.platform_icon_sha256 = platform_icons.sha256
                        AND d.status IN ('pending', 'approved') AND d.expires_at > ${now})
      AND NOT EXISTS (SELECT 1 FROM grants g WHERE g.platform_icon_sha256 = platform_icons.sha256 AND g.revoked_at IS NULL)`,
    limit,
  );
