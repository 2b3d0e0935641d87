import { sql, type RawBuilder } from 'kysely';
import { compiledOnce } from '../db/compiled-statement.js';
import type { Database } from '../db/connect.js';

export interface RotationInput {
  presentedHash: Uint8Array;
  clientId: string;
  /** null keeps the grant's scopes; otherwise they become these, if they are a subset. */
  scopes: string[] | null;
  refreshHash: Uint8Array;
  refreshExpiresAt: Date;
  accessHash: Uint8Array;
  accessExpiresAt: Date;
  ip: string;
  /** The request's DPoP key, if it proved one: a bound grant rotates only with its own key. */
  dpopJkt: string | null;
  now: Date;
}

/** The presented token as the statement found it, and whether this call rotated it. */
export interface RotationOutcome {
  grant_id: string;
  client_id: string;
  user_id: string;
  /** Already replaced when the statement began. */
  replaced: boolean;
  expired: boolean;
  /** Grant not revoked, user not banned, app not disabled. */
  live: boolean;
  client_disabled: boolean;
  /** The requested scopes (if any) are within the grant's. */
  scope_ok: boolean;
  /** The grant is unbound, or the request proved its DPoP key (RFC 9449 §5). */
  key_ok: boolean;
  /** The grant's scopes before this call narrowed them. */
  scopes: string[];
  auth_time: Date;
  email: string;
  name: string | null;
  rotated: boolean;
  /**
   * The grant's last use before this call: the rotation a retry repeats (or a retry of it from the
   * same class of place). A retry from elsewhere is reuse (issue 27 §3).
   */
  previous_ip: string | null;
  /** Device flow only: where the approver was; a refresh from another country or a hosting network is recorded. */
  approver_ip: string | null;
}

/** The refresh grant's rules for a rotation, applied by its one statement. */
export interface RotationRules {
  /** Whether the grant may still be used: not revoked, its user not banned, its app not disabled. */
  live(values: {
    grantRevokedAt: RawBuilder<Date | null>;
    userBannedAt: RawBuilder<Date | null>;
    clientDisabledAt: RawBuilder<Date | null>;
  }): RawBuilder<boolean>;
  /** Whether the requested scopes (null when none were asked for) are within the grant's. */
  scopeWithin(requested: RawBuilder<string[] | null>, granted: RawBuilder<string[]>): RawBuilder<boolean>;
  /** Whether the request may use a grant bound to a key (`bound`), having proven `proven`. */
  keyProven(bound: RawBuilder<string | null>, proven: RawBuilder<string | null>): RawBuilder<boolean>;
}

/**
 * One statement, one round trip: finds the presented token with its grant, user and client
 * (point lookups by primary key) and, only while the grant names it as its current token
 * and it is unexpired, the caller's and live, moves the grant on to the successor (with last use,
 * expiry and narrowed scopes: one HOT update of a row the rotation touches anyway), inserts the
 * successors and records the rotation. `rotated` false on a known token is for the caller to judge.
 *
 * The refresh grant's rules (oauth/grant-types/refresh-token.rules.ts) name what makes a grant live,
 * a scope within it and a key proven; they are given once, when the rotation is made.
 *
 * DPoP (RFC 9449 §5): a bound grant rotates only when the request proved the grant's key, a
 * condition of the UPDATE itself, so a refresh without it changes nothing. The new access token is
 * bound to the proof's key, if any: a bound grant's, or, for an unbound grant, the key its client
 * now proves (the access token is bound, the grant stays as it was, as §5 allows).
 *
 * Concurrency: the UPDATE of the grant takes its row lock; a concurrent rotation of the same token
 * (or a revocation of the grant) waits for it and, once it commits, re-checks its conditions on
 * the grant's new row version (READ COMMITTED): `current_refresh_hash` no longer names the
 * presented token, so it rotates nothing, while `presented` still shows the statement's
 * snapshot, in which the token looked current.
 */
export function refreshRotation(rules: RotationRules) {
  const statement = compiledOnce<RotationOutcome, RotationInput>(
    (input) => sql`
    WITH presented AS (
      SELECT r.grant_id, g.client_id, g.user_id, g.scopes, g.auth_time, u.email, u.name,
             g.current_refresh_hash IS DISTINCT FROM r.token_hash AS replaced,
             r.expires_at <= this_call.at AS expired,
             ${rules.live({ grantRevokedAt: sql`g.revoked_at`, userBannedAt: sql`u.banned_at`, clientDisabledAt: sql`c.disabled_at` })} AS live,
             c.disabled_at IS NOT NULL AS client_disabled,
             ${rules.scopeWithin(sql`${input.scopes}::text[]`, sql`g.scopes`)} AS scope_ok,
             ${rules.keyProven(sql`g.dpop_jkt`, sql`${input.dpopJkt}::text`)} AS key_ok,
             g.last_used_ip AS previous_ip, g.approver_ip,
             this_call.at
      FROM (SELECT ${input.now}::timestamptz AS at) this_call, refresh_tokens r
      JOIN grants g ON g.grant_id = r.grant_id
      JOIN users u ON u.user_id = g.user_id
      JOIN clients c ON c.client_id = g.client_id
      WHERE r.token_hash = ${input.presentedHash}
    ),
    rotated AS (
      UPDATE grants g
      SET current_refresh_hash = ${input.refreshHash}, last_used_at = p.at, last_used_ip = ${input.ip}, expires_at = ${input.refreshExpiresAt},
          scopes = coalesce(${input.scopes}::text[], g.scopes)
      FROM presented p
      WHERE g.grant_id = p.grant_id
        AND g.current_refresh_hash = ${input.presentedHash} AND g.revoked_at IS NULL
        AND NOT p.expired AND p.client_id = ${input.clientId} AND p.live AND p.scope_ok AND p.key_ok
      RETURNING g.grant_id, g.user_id, g.client_id, g.scopes, p.at
    ),
    successor AS (
      INSERT INTO refresh_tokens (token_hash, grant_id, created_at, expires_at)
      SELECT ${input.refreshHash}, grant_id, at, ${input.refreshExpiresAt} FROM rotated
    ),
    access AS (
      INSERT INTO access_tokens (token_hash, grant_id, user_id, client_id, scopes, created_at, expires_at, dpop_jkt)
      SELECT ${input.accessHash}, grant_id, user_id, client_id, scopes, at, ${input.accessExpiresAt}, ${input.dpopJkt}::text FROM rotated
    ),
    event AS (
      INSERT INTO events (grant_id, user_id, client_id, type, client_ip, created_at)
      SELECT grant_id, user_id, client_id, 'grant.rotated', ${input.ip}, at FROM rotated
    )
    SELECT p.grant_id, p.client_id, p.user_id, p.replaced, p.expired, p.live, p.client_disabled, p.scope_ok, p.key_ok,
           p.scopes, p.auth_time, p.email, p.name, EXISTS (SELECT 1 FROM rotated) AS rotated, p.previous_ip, p.approver_ip
    FROM presented p`,
  );
  return async function rotateRefreshToken(db: Database, input: RotationInput): Promise<RotationOutcome | undefined> {
    return (await statement(db, input)).rows[0];
  };
}

export interface RetryInput {
  grantId: string;
  clientId: string;
  /** What the lost answer carried: the successor refresh token and the access token, as hashes. */
  successorHash: Uint8Array;
  accessHash: Uint8Array;
  /** The successor must have been issued after this instant (the retry window's start). */
  rotatedAfter: Date;
  ip: string;
  now: Date;
}

/** The lost answer's access token, as stored. */
export interface RetriedAnswer {
  scopes: string[];
  access_expires_at: Date;
  /** The key the lost answer's access token is bound to (RFC 9449), or null. */
  dpop_jkt: string | null;
}

/**
 * A retried refresh, in one statement: only while the grant still names the successor of the
 * presented token as its current refresh token (nobody has used the successor yet), that
 * successor was issued within the retry window and the grant is live. Its UPDATE takes the
 * grant's row lock, so it is serialised with the successor's own rotation: whichever commits
 * first decides, and a retry that comes second finds `current_refresh_hash` moved on, matches
 * nothing, and leaves the caller to treat the presentation as reuse.
 */
const retryStatement = compiledOnce<RetriedAnswer, RetryInput>(
  (input) => sql`
    WITH retried AS (
      UPDATE grants g
      SET last_used_at = ${input.now}, last_used_ip = ${input.ip}
      FROM refresh_tokens s, access_tokens a
      WHERE g.grant_id = ${input.grantId} AND g.client_id = ${input.clientId}
        AND g.current_refresh_hash = ${input.successorHash} AND g.revoked_at IS NULL
        AND s.token_hash = ${input.successorHash} AND s.grant_id = g.grant_id AND s.created_at > ${input.rotatedAfter}
        AND a.token_hash = ${input.accessHash} AND a.grant_id = g.grant_id AND a.expires_at > ${input.now}
      RETURNING g.grant_id, g.user_id, g.client_id, a.scopes, a.expires_at, a.dpop_jkt
    ),
    event AS (
      INSERT INTO events (grant_id, user_id, client_id, type, client_ip, created_at)
      SELECT grant_id, user_id, client_id, 'grant.retried', ${input.ip}, ${input.now} FROM retried
    )
    SELECT scopes, expires_at AS access_expires_at, dpop_jkt FROM retried`,
);

export async function retryRotation(db: Database, input: RetryInput): Promise<RetriedAnswer | undefined> {
  return (await retryStatement(db, input)).rows[0];
}
