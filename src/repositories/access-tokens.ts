import { sql, type Transaction } from 'kysely';
import { compiledOnce } from '../db/compiled-statement.js';
import type { Database } from '../db/connect.js';
import type { DB } from '../db/schema.js';

interface LiveToken {
  scopes: string[];
  created_at: Date;
  expires_at: Date;
  link_id: string;
  user_id: string;
  client_id: string;
  email: string;
  name: string | null;
}

/**
 * The one rule for a live access token: stored (revoking its chain deletes it, in the revoking
 * transaction: see revokeChains), unexpired, its user not banned and its app not disabled. Point
 * lookups read on every call, so a revocation or sign-out takes effect on the very next request
 * with no cache to invalidate. The chain's wide device_links row is not read: the token carries
 * its user and app.
 */
const liveToken = (p: { tokenHash: Uint8Array; now: Date }) => sql<LiveToken>`
  SELECT a.scopes, a.created_at, a.expires_at, a.link_id, a.user_id, a.client_id, u.email, u.name
  FROM access_tokens a
  JOIN users u ON u.user_id = a.user_id
  JOIN clients c ON c.client_id = a.client_id
  WHERE a.token_hash = ${p.tokenHash} AND a.expires_at > ${p.now}
    AND u.banned_at IS NULL AND c.disabled_at IS NULL`;

const liveTokenStatement = compiledOnce(liveToken);

export async function findLiveAccessToken(db: Database, tokenHash: Uint8Array, now: Date) {
  return (await liveTokenStatement(db, { tokenHash, now })).rows[0];
}

type LiveTokenForCaller = { caller_enabled: boolean } & { [K in keyof LiveToken]: LiveToken[K] | null };

const liveTokenForCallerStatement = compiledOnce((p: { tokenHash: Uint8Array; now: Date; callerId: string }) =>
  sql<LiveTokenForCaller>`
    SELECT caller.disabled_at IS NULL AS caller_enabled, t.*
    FROM clients caller
    LEFT JOIN LATERAL (${liveToken(p)}) t ON true
    WHERE caller.client_id = ${p.callerId}`,
);

/**
 * findLiveAccessToken for an introspecting resource server, with whether that caller's app is
 * enabled, in the same round trip. Undefined when the caller does not exist; token columns are
 * null when the token is not live.
 */
export async function findLiveAccessTokenForCaller(db: Database, tokenHash: Uint8Array, now: Date, callerId: string) {
  return (await liveTokenForCallerStatement(db, { tokenHash, now, callerId })).rows[0];
}

/**
 * Deletes every access token of the given chains. One array parameter, so the statement's text
 * (and its prepared plan) is the same however many chains a ban revokes.
 */
export async function deleteAccessTokensOfLinks(trx: Transaction<DB>, linkIds: string[]): Promise<void> {
  if (linkIds.length === 0) return;
  await trx
    .deleteFrom('access_tokens')
    .where(sql<boolean>`link_id = ANY(${linkIds}::uuid[])`)
    .execute();
}
