import { sql, type RawBuilder } from 'kysely';
import type { Database } from '../db/connect.js';
import type { DB } from '../db/schema.js';

/**
 * Each function deletes at most `limit` rows in one short statement and returns how many it
 * deleted, so a purge never holds locks (or the embedded database's one connection) for long.
 */

/**
 * Deletes at most `limit` rows of `table` that meet `condition`, picked by their `key`.
 *
 * `= ANY (ARRAY(...))` rather than `IN (SELECT ...)`: statements are prepared, and in a generic
 * plan (LIMIT unknown) PostgreSQL turned the IN form into a hash join over a sequential scan of
 * the whole table, for every batch. The array form is always an index lookup per picked key.
 * The condition is checked again on each row the DELETE reaches, so a row changed since the
 * pick (a rate limit counter renewed into a new window, say) is left alone.
 */
export async function deleteUpTo(db: Database, table: keyof DB, key: string, condition: RawBuilder<boolean>, limit: number): Promise<number> {
  const result = await sql`
    DELETE FROM ${sql.table(table)}
    WHERE ${sql.ref(key)} = ANY (ARRAY(SELECT ${sql.ref(key)} FROM ${sql.table(table)} WHERE ${condition} LIMIT ${limit}))
      AND ${condition}`.execute(db);
  return Number(result.numAffectedRows ?? 0n);
}

export const deleteExpiredDeviceRequests = (db: Database, before: Date, limit: number) =>
  deleteUpTo(db, 'device_requests', 'request_id', sql<boolean>`expires_at < ${before}`, limit);

/** Codes an hour past their 5 minutes: a replay that late is refused as unknown, with nothing left to revoke by it. */
export const deleteExpiredAuthorizationCodes = (db: Database, before: Date, limit: number) =>
  deleteUpTo(db, 'authorization_codes', 'code_hash', sql<boolean>`expires_at < ${before}`, limit);

export const deleteExpiredBrowserSessions = (db: Database, before: Date, limit: number) =>
  deleteUpTo(db, 'browser_sessions', 'session_hash', sql<boolean>`expires_at < ${before}`, limit);

/** Used DPoP proofs whose iat no clock would accept any more (RFC 9449 §11.1). */
export const deleteExpiredDpopProofs = (db: Database, before: Date, limit: number) =>
  deleteUpTo(db, 'dpop_proofs', 'proof_hash', sql<boolean>`expires_at < ${before}`, limit);

export const deleteExpiredAccessTokens = (db: Database, before: Date, limit: number) =>
  deleteUpTo(db, 'access_tokens', 'token_hash', sql<boolean>`expires_at < ${before}`, limit);

/**
 * Grants that ended (revoked or expired) before `before`; their refresh tokens, old ones
 * included, and their events go with them. Old refresh tokens of a live grant are never
 * deleted on their own: reuse detection needs them for as long as the grant lives.
 */
export const deleteEndedGrants = (db: Database, before: Date, limit: number) =>
  deleteUpTo(db, 'grants', 'grant_id', sql<boolean>`((revoked_at IS NOT NULL AND revoked_at < ${before}) OR expires_at < ${before})`, limit);
