import { z } from 'zod';
import type { Deps } from '../../deps.js';
import { revokeAndCountGrants } from '../grant-revocation.js';
import { refuseIfDisabled, type Client } from '../client-auth.js';
import { invalidGrant } from '../errors.js';
import { retryGrantTokens, rotateGrantTokens } from '../issuance.js';
import { REFRESH_TOKEN_GRANT } from '../metadata.js';
import { parseScope } from '../scopes.js';
import type { RotationOutcome } from '../../repositories/refresh-tokens.js';
import type { TokenResponse } from '../token-response.js';
import { couldBeOurRefreshToken, judgeUnrotated, UNKNOWN } from './refresh-token.rules.js';
import type { GrantContext } from './types.js';
import { movedClass, refreshedElsewhere } from '../device/proximity.js';
import { recordEvents } from '../../events/event-log.js';

export const grantType = REFRESH_TOKEN_GRANT;

export const parameters = z.object({
  refresh_token: z.string().min(1),
  scope: z.string().optional(),
});

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
  if (!couldBeOurRefreshToken(form.refresh_token)) {
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
  const verdict = judgeUnrotated(outcome, requested);
  if (verdict.spendProof) await context.spendProof();
  if (verdict.refusal) throw verdict.refusal;
  return retryOrRevoke(deps, client, form.refresh_token, outcome, context);
}

/**
 * A replaced token presented again: the lost answer once more if this is a retry (see
 * retryGrantTokens), otherwise reuse, and the grant is revoked (RFC 9700 §4.14.2).
 */
async function retryOrRevoke(deps: Deps, client: Client, presentedToken: string, outcome: RotationOutcome, context: GrantContext): Promise<TokenResponse> {
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
 *
 * grant.refreshed_elsewhere is an observation about a rotation that has committed (issue 32 §1),
 * not a change: it is written on its own, after the rotation's statement, because judging the
 * move needs the places that statement returns, and writing it inside would cost every rotation
 * a round trip. The rotation's own event (grant.rotated) is in its statement; should the process
 * stop between the two, the rotation stands and this observation is lost.
 */
async function recordIfElsewhere(deps: Deps, outcome: RotationOutcome, context: GrantContext): Promise<void> {
  const signals = refreshedElsewhere(deps.geo, { approverIp: outcome.approver_ip, previousIp: outcome.previous_ip }, context.ip);
  if (signals === null) return;
  await recordEvents(deps.db, [
    {
      grant_id: outcome.grant_id,
      user_id: outcome.user_id,
      client_id: outcome.client_id,
      type: 'grant.refreshed_elsewhere',
      reason: signals.join(' '),
      client_ip: context.ip,
      created_at: deps.clock.now(),
      data: JSON.stringify({ signals, approver_ip: outcome.approver_ip, previous_ip: outcome.previous_ip }),
    },
  ]);
}

/** Committed before invalid_grant goes out: a throw inside a transaction would roll it back. */
async function revokeReusedGrant(deps: Deps, outcome: { grant_id: string }, context: GrantContext): Promise<never> {
  await revokeAndCountGrants(deps, { grantId: outcome.grant_id }, 'reuse_detected', context.ip);
  throw invalidGrant('the refresh token was already used; the grant has been revoked for safety');
}
