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
