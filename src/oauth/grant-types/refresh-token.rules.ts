import { sql } from 'kysely';
import type { RotationOutcome, RotationRules } from '../../repositories/refresh-tokens.js';
import { DISABLED_APP } from '../client-auth.js';
import { keyNotProven } from '../dpop.js';
import { invalidClient, invalidGrant, invalidScope, OAuthError } from '../errors.js';
import { narrowedScopes } from '../scopes.js';
import { TOKEN_PREFIX } from '../opaque-tokens.js';
import { keyProvenSql } from './key-binding.js';

/**
 * The refresh grant's rules (RFC 6749 §6 with rotation, RFC 9700 §4.14.2, RFC 9449 §5), in one
 * place: what its rotation's statement applies (repositories/refresh-tokens.ts, refreshRotation)
 * and how the grant reads what the statement found when it did not rotate.
 */

/** A grant is used only while live; a rotation narrows scopes, never widens them; a bound grant needs its key. */
export const rotationRules: RotationRules = {
  live: ({ grantRevokedAt, userBannedAt, clientDisabledAt }) =>
    sql<boolean>`(${grantRevokedAt} IS NULL AND ${userBannedAt} IS NULL AND ${clientDisabledAt} IS NULL)`,
  // RFC 6749 §6: the scope may narrow what was granted, never widen it.
  scopeWithin: (requested, granted) => sql<boolean>`(${requested} IS NULL OR ${requested} <@ ${granted})`,
  keyProven: keyProvenSql,
};

/** Longer than any token we issue. */
const MAX_TOKEN_LENGTH = 256;

/** Whether a value could be a refresh token we issued; anything else is refused without a lookup. */
export function couldBeOurRefreshToken(value: string): boolean {
  return value.startsWith(TOKEN_PREFIX.refreshToken) && value.length <= MAX_TOKEN_LENGTH;
}

export const UNKNOWN = 'the refresh token is invalid, expired or revoked';

/** What a refresh whose token the statement found but did not rotate hears. */
export interface UnrotatedVerdict {
  /**
   * Whether the request's DPoP proof is recorded as used first (issue 28 §2): once the token is
   * found, the app's and of the proof's key, and before a retry could answer or a reuse revoke,
   * so that a replayed proof does neither.
   */
  spendProof: boolean;
  /** The answer, or null: a replaced token presented again, a retry of a lost answer or reuse (see retryOrRevoke). */
  refusal: OAuthError | null;
}

const APP_DISABLED: UnrotatedVerdict = Object.freeze({ spendProof: false, refusal: invalidClient(DISABLED_APP) });
const KEY_NOT_PROVEN: UnrotatedVerdict = Object.freeze({
  spendProof: false,
  refusal: keyNotProven('token_endpoint', 'this refresh token is bound to a DPoP key; send a proof of that key'),
});
const NOT_LIVE: UnrotatedVerdict = Object.freeze({ spendProof: true, refusal: invalidGrant(UNKNOWN) });
const EXPIRED: UnrotatedVerdict = Object.freeze({ spendProof: true, refusal: invalidGrant('the refresh token has expired; sign in again') });
const RETRY_OR_REUSE: UnrotatedVerdict = Object.freeze({ spendProof: true, refusal: null });

/**
 * The checks of a refresh that did not rotate, in their order: the app enabled; the key proven
 * (before the replay rule: whoever lacks the key cannot use the token, and must not revoke the
 * grant with it); then, the proof spent, the grant live; a replaced token is a retry or reuse;
 * unexpired; the scope within the grant's. A token current, live and in scope, yet not rotated,
 * was replaced by a concurrent refresh with the same token: this one gets that refresh's answer
 * (or, past the retry window, counts as reuse).
 */
export function judgeUnrotated(
  outcome: Pick<RotationOutcome, 'client_disabled' | 'key_ok' | 'live' | 'replaced' | 'expired' | 'scope_ok' | 'scopes'>,
  requestedScopes: string[] | null,
): UnrotatedVerdict {
  if (outcome.client_disabled) return APP_DISABLED;
  if (!outcome.key_ok) return KEY_NOT_PROVEN;
  if (!outcome.live) return NOT_LIVE;
  if (outcome.replaced) return RETRY_OR_REUSE;
  if (outcome.expired) return EXPIRED;
  if (!outcome.scope_ok) return { spendProof: true, refusal: scopeRefusal(requestedScopes, outcome.scopes) };
  return RETRY_OR_REUSE;
}

/** RFC 6749 §6: invalid_scope, naming the scopes beyond the grant's. */
function scopeRefusal(requested: string[] | null, granted: readonly string[]): OAuthError {
  try {
    narrowedScopes(requested ?? undefined, granted);
  } catch (error) {
    if (error instanceof OAuthError) return error;
    throw error;
  }
  return invalidScope('scope exceeds what was granted');
}
