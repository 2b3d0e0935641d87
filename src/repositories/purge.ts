import { sql, type RawBuilder } from 'kysely';
import type { Database } from '../db/connect.js';
import type { DB } from '../db/schema.js';
import { eventTypeLiteral } from '../events/event-log.js';

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

/**
 * Requests that expired before `before`, picked as deleteUpTo picks. A request that ended without
 * a decision or without its tokens (still pending, or approved and never picked up) gets its
 * device_request.expired event in the same statement. Expiry changes no row, so the event is an
 * observation, recorded when the purge removes the request (an hour after it expired:
 * deviceRequestRetentionSeconds) at `now`, with `expired_at` saying when it happened. Recorded at
 * deletion, it is recorded exactly once, whichever instance purges.
 */
export async function deleteExpiredDeviceRequests(db: Database, before: Date, limit: number, now: Date): Promise<number> {
  const result = await sql<{ deleted: number }>`
    WITH deleted AS (
      DELETE FROM device_requests
      WHERE request_id = ANY (ARRAY(SELECT request_id FROM device_requests WHERE expires_at < ${before} LIMIT ${limit}))
        AND expires_at < ${before}
      RETURNING request_id, client_id, user_id, status, expires_at
    ),
    event AS (
      INSERT INTO events (type, client_id, user_id, created_at, data)
      SELECT ${eventTypeLiteral('device_request.expired')}, client_id, user_id, ${now}::timestamptz,
             jsonb_build_object('request_id', request_id::text, 'status', status, 'expired_at', expires_at)
      FROM deleted
      WHERE status IN ('pending', 'approved')
    )
    SELECT count(*)::int AS deleted FROM deleted`.execute(db);
  return result.rows[0]?.deleted ?? 0;
}

/**
 * Events recorded before `before` (EVENT_RETENTION_DAYS), those of deleted users and apps
 * included. Each batch looks at the `limit` oldest events by event_id (the primary key; no index
 * on created_at adds a write to every event) and deletes those old enough: events are recorded in
 * about the order of their times, so the oldest ids are the oldest events. An event recorded out
 * of order (another instance's clock a little behind) only waits for a later batch.
 */
export async function deleteOldEvents(db: Database, before: Date, limit: number): Promise<number> {
  const result = await sql`
    DELETE FROM events
    WHERE event_id = ANY (ARRAY(
      SELECT event_id FROM (SELECT event_id, created_at FROM events ORDER BY event_id LIMIT ${limit}) oldest
      WHERE created_at < ${before}))`.execute(db);
  return Number(result.numAffectedRows ?? 0n);
}

/** Codes an hour past their 5 minutes: a replay that late is refused as unknown, with nothing left to revoke by it. */
export const deleteExpiredAuthorizationCodes = (db: Database, before: Date, limit: number) =>
  deleteUpTo(db, 'authorization_codes', 'code_hash', sql<boolean>`expires_at < ${before}`, limit);

export const deleteExpiredBrowserSessions = (db: Database, before: Date, limit: number) =>
  deleteUpTo(db, 'browser_sessions', 'session_hash', sql<boolean>`expires_at < ${before}`, limit);

/** Used DPoP proofs whose iat no clock would accept any more (RFC 9449 §11.1). */
export const deleteExpiredDpopProofs = (db: Database, before: Date, limit: number) =>
  deleteUpTo(db, 'dpop_proofs', 'proof_hash', sql<boolean>`expires_at < ${before}`, limit);

/** Deliveries of events that were delivered or given up before `before`, with their attempts (the delivery log). */
export const deleteFinishedDeliveries = (db: Database, before: Date, limit: number) =>
  deleteUpTo(db, 'outbound_deliveries', 'delivery_id', sql<boolean>`(delivered_at IS NOT NULL OR gave_up_at IS NOT NULL) AND created_at < ${before}`, limit);

export const deleteExpiredAccessTokens = (db: Database, before: Date, limit: number) =>
  deleteUpTo(db, 'access_tokens', 'token_hash', sql<boolean>`expires_at < ${before}`, limit);

/** Apps' own tokens (the client_credentials grant), once expired. */
export const deleteExpiredAppAccessTokens = (db: Database, before: Date, limit: number) =>
  deleteUpTo(db, 'app_access_tokens', 'token_hash', sql<boolean>`expires_at < ${before}`, limit);

/**
 * Grants that ended (revoked or expired) before `before`; their refresh tokens, old ones
 * included, go with them (their events stay for EVENT_RETENTION_DAYS). Old refresh tokens of a
 * live grant are never deleted on their own: reuse detection needs them for as long as the grant lives.
 */
export const deleteEndedGrants = (db: Database, before: Date, limit: number) =>
  deleteUpTo(db, 'grants', 'grant_id', sql<boolean>`((revoked_at IS NOT NULL AND revoked_at < ${before}) OR expires_at < ${before})`, limit);

/** Shared Signals SETs older than `before`: never acknowledged (poll), or long delivered or given up (push). */
export const deleteOldSecurityEventTokens = (db: Database, before: Date, limit: number) =>
  deleteUpTo(db, 'ssf_sets', 'jti', sql<boolean>`created_at < ${before}`, limit);
