import { z } from 'zod';
import type { Deps } from '../../deps.js';
import { revokeAndCountGrants } from '../grant-revocation.js';
import { DISABLED_APP, refuseIfDisabled, type Client } from '../client-auth.js';
import { keyNotProven } from '../dpop.js';
import { invalidClient, invalidGrant, invalidScope } from '../errors.js';
import { retryGrantTokens, rotateGrantTokens } from '../issuance.js';
import { REFRESH_TOKEN_GRANT } from '../metadata.js';
import { narrowedScopes, parseScope } from '../scopes.js';
import type { RotationOutcome } from '../../repositories/refresh-tokens.js';
import type { TokenResponse } from '../token-response.js';
import { TOKEN_PREFIX } from '../tokens.js';
import type { GrantContext } from './types.js';
import { movedClass, refreshedElsewhere } from '../device/proximity.js';
import { insertGrantEvent } from '../../repositories/grants.js';

export const grantType = REFRESH_TOKEN_GRANT;

export const parameters = z.object({
  refresh_token: z.string().min(1),
  scope: z.string().optional(),
});

const UNKNOWN = 'the refresh token is invalid, expired or revoked';

/**
 * RFC 6749 §6 with rotation (RFC 9700 §4.14.2): every refresh replaces the presented token, and
 * a replaced token presented again means two parties hold the grant, so the whole grant is
 * revoked — unless it is a retry of a refresh whose answer was lost: the immediately previous
 * token, within REFRESH_RETRY_WINDOW seconds of its rotation, while its successor is unused. That
 * gets the lost answer again (retryGrantTokens). The rotation is one SQL statement (see
 * rotateRefreshToken); the only other database work is on the retry and failure paths.
 *
 * Two refreshes racing with the same token: the database serialises them on the grant's row, so
 * exactly one rotates, and the others, being retries within the window, get the same answer. A
 * retry racing with the successor's first use is serialised the same way: if the successor
 * rotates first, the retry is reuse and the grant is revoked. Never two live successors.
 */
export async function handle(deps: Deps, client: Client, form: z.output<typeof parameters>, context: GrantContext): Promise<TokenResponse> {
  const scope = parseScope(form.scope);
  const requested = scope && scope.length > 0 ? scope : null;
  // Not a token we issue: spare the database.
  if (!form.refresh_token.startsWith(TOKEN_PREFIX.refreshToken) || form.refresh_token.length > 256) {
    await refuseIfDisabled(deps.clients, client);
    throw invalidGrant(UNKNOWN);
  }

  const rotation = await rotateGrantTokens(deps, {
    client,
    presentedToken: form.refresh_token,
    requestedScopes: requested,
    ip: context.ip,
    dpopJkt: context.dpopJkt,
  });
  if (rotation.kind === 'rotated') {
    // Issue 28 §2: recorded as used once the token was found, the app's and of the proof's key; a
    // replayed proof loses this answer, which a retry with a new proof gets again (retryGrantTokens).
    await context.spendProof();
    await recordIfElsewhere(deps, rotation.outcome, context);
    return rotation.response;
  }
  if (rotation.kind === 'unknown') {
    await refuseIfDisabled(deps.clients, client);
    throw invalidGrant(UNKNOWN);
  }
  const outcome = rotation.outcome;
  if (outcome.client_disabled) throw invalidClient(DISABLED_APP);
  // Before the replay rule: whoever lacks the key cannot use the token, and must not revoke the grant with it.
  if (!outcome.key_ok) throw keyNotProven('token_endpoint', 'this refresh token is bound to a DPoP key; send a proof of that key');
  // Issue 28 §2: the token is found, the app's and of the proof's key: the proof is spent before a
  // retry could answer or a reuse revoke, so a replayed proof does neither.
  await context.spendProof();
  if (!outcome.live) throw invalidGrant(UNKNOWN);
  if (outcome.replaced) return retryOrRevoke(deps, client, form.refresh_token, outcome, context);
  if (outcome.expired) throw invalidGrant('the refresh token has expired; sign in again');
  if (!outcome.scope_ok) {
    // RFC 6749 §6: the scope may narrow what was granted, never widen it.
    narrowedScopes(requested ?? undefined, outcome.scopes);
    throw invalidScope('scope exceeds what was granted');
  }
  // Current, live and in scope, yet not rotated: a concurrent refresh with the same token replaced
  // it first, and this one gets that refresh's answer (or, past the window, counts as reuse).
  return retryOrRevoke(deps, client, form.refresh_token, outcome, context);
}

/**
 * A replaced token presented again: the lost answer once more if this is a retry (see
 * retryGrantTokens), otherwise reuse, and the grant is revoked (RFC 9700 §4.14.2).
 */
async function retryOrRevoke(
  deps: Deps,
  client: Client,
  presentedToken: string,
  outcome: RotationOutcome,
  context: GrantContext,
): Promise<TokenResponse> {
  // Issue 27 §3: a copied old token presented from another country, AS or hosting class than the
  // rotation it would repeat is reuse, not a lost answer.
  if (outcome.previous_ip !== null && movedClass(deps.geo, outcome.previous_ip, context.ip)) return revokeReusedGrant(deps, outcome, context);
  const retried = await retryGrantTokens(deps, { client, presentedToken, outcome, ip: context.ip });
  if (retried) return retried;
  return revokeReusedGrant(deps, outcome, context);
}

/**
 * Issue 27 §3: a device-flow grant refreshed from another country than its approval or from a
 * hosting network is recorded, once per move (the ordinary refresh writes nothing more).
 */
async function recordIfElsewhere(deps: Deps, outcome: RotationOutcome, context: GrantContext): Promise<void> {
  const signals = refreshedElsewhere(deps.geo, { approverIp: outcome.approver_ip, previousIp: outcome.previous_ip }, context.ip);
  if (signals === null) return;
  await insertGrantEvent(deps.db, {
    grant_id: outcome.grant_id,
    user_id: outcome.user_id,
    client_id: outcome.client_id,
    event: 'refreshed_elsewhere',
    reason: signals.join(' '),
    client_ip: context.ip,
    created_at: deps.clock.now(),
    details: JSON.stringify({ signals, approver_ip: outcome.approver_ip, previous_ip: outcome.previous_ip }),
  });
}

/** Committed before invalid_grant goes out: a throw inside a transaction would roll it back. */
async function revokeReusedGrant(deps: Deps, outcome: { grant_id: string }, context: GrantContext): Promise<never> {
  await revokeAndCountGrants(deps, { grantId: outcome.grant_id }, 'reuse_detected', context.ip);
  throw invalidGrant('the refresh token was already used; the grant has been revoked for safety');
}
