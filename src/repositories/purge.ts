import { sql } from 'kysely';
import type { Database } from '../db/connect.js';

/**
 * Each function deletes at most `limit` rows in one short statement and returns how many it
 * deleted, so a purge never holds locks (or the embedded database's one connection) for long.
 */

export async function deleteExpiredDeviceRequests(db: Database, before: Date, limit: number): Promise<number> {
  const result = await sql`
    DELETE FROM device_requests WHERE request_id IN (
      SELECT request_id FROM device_requests WHERE expires_at < ${before} LIMIT ${limit}
    )`.execute(db);
  return Number(result.numAffectedRows ?? 0n);
}

export async function deleteExpiredBrowserSessions(db: Database, before: Date, limit: number): Promise<number> {
  const result = await sql`
    DELETE FROM browser_sessions WHERE session_hash IN (
      SELECT session_hash FROM browser_sessions WHERE expires_at < ${before} LIMIT ${limit}
    )`.execute(db);
  return Number(result.numAffectedRows ?? 0n);
}

export async function deleteExpiredAccessTokens(db: Database, before: Date, limit: number): Promise<number> {
  const result = await sql`
    DELETE FROM access_tokens WHERE token_hash IN (
      SELECT token_hash FROM access_tokens WHERE expires_at < ${before} LIMIT ${limit}
    )`.execute(db);
  return Number(result.numAffectedRows ?? 0n);
}

/**
 * Chains that ended (revoked or expired) before `before`; their refresh tokens, old ones
 * included, and their events go with them. Old refresh tokens of a live chain are never
 * deleted on their own: reuse detection needs them for as long as the chain lives.
 */
export async function deleteEndedLinks(db: Database, before: Date, limit: number): Promise<number> {
  const result = await sql`
    DELETE FROM device_links WHERE link_id IN (
      SELECT link_id FROM device_links
      WHERE (revoked_at IS NOT NULL AND revoked_at < ${before}) OR expires_at < ${before}
      LIMIT ${limit}
    )`.execute(db);
  return Number(result.numAffectedRows ?? 0n);
}
