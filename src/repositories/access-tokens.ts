import { sql } from 'kysely';
import type { Database } from '../db/connect.js';

/**
 * An access token is live only while it is unexpired, its link (chain) is not revoked, its user
 * is not banned and its app not disabled: one indexed join, so a revocation or sign-out takes
 * effect on the very next request with no cache to invalidate.
 */
export async function findLiveAccessToken(db: Database, tokenHash: Uint8Array, now: Date) {
  return db
    .selectFrom('access_tokens as a')
    .innerJoin('device_links as l', 'l.link_id', 'a.link_id')
    .innerJoin('users as u', 'u.user_id', 'l.user_id')
    .innerJoin('clients as c', 'c.client_id', 'l.client_id')
    .select(['a.scopes', 'a.created_at', 'a.expires_at', 'l.link_id', 'l.user_id', 'l.client_id', 'u.email', 'u.name'])
    .where('a.token_hash', '=', tokenHash)
    .where('a.expires_at', '>', now)
    .where('l.revoked_at', 'is', null)
    .where('u.banned_at', 'is', null)
    .where('c.disabled_at', 'is', null)
    .executeTakeFirst();
}

/**
 * findLiveAccessToken for an introspecting resource server, with whether that caller's app is
 * enabled, in the same round trip. Undefined when the caller does not exist; token columns are
 * null when the token is not live.
 */
export async function findLiveAccessTokenForCaller(db: Database, tokenHash: Uint8Array, now: Date, callerId: string) {
  const result = await sql<{
    caller_enabled: boolean;
    scopes: string[] | null;
    created_at: Date | null;
    expires_at: Date | null;
    link_id: string | null;
    user_id: string | null;
    client_id: string | null;
    email: string | null;
    name: string | null;
  }>`
    SELECT caller.disabled_at IS NULL AS caller_enabled, t.*
    FROM clients caller
    LEFT JOIN LATERAL (
      SELECT a.scopes, a.created_at, a.expires_at, l.link_id, l.user_id, l.client_id, u.email, u.name
      FROM access_tokens a
      JOIN device_links l ON l.link_id = a.link_id
      JOIN users u ON u.user_id = l.user_id
      JOIN clients c ON c.client_id = l.client_id
      WHERE a.token_hash = ${tokenHash} AND a.expires_at > ${now}
        AND l.revoked_at IS NULL AND u.banned_at IS NULL AND c.disabled_at IS NULL
    ) t ON true
    WHERE caller.client_id = ${callerId}`.execute(db);
  return result.rows[0];
}
