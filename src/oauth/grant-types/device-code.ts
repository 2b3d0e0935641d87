import { z } from 'zod';
import type { Deps } from '../../deps.js';
import { lockUserForIssuance } from '../../repositories/users.js';
import {
  denyApprovedForRedeemer,
  denyRedeemedForBannedUser,
  isDeviceRequestBound,
  recordDevicePoll,
  redeemApprovedRequest,
  setDeviceRequestGrant,
} from '../../repositories/device-requests.js';
import { DISABLED_APP, refuseIfDisabled, type Client } from '../client-auth.js';
import { keyNotProven } from '../dpop.js';
import { accessDenied, authorizationPending, expiredToken, invalidClient, invalidGrant, slowDown } from '../errors.js';
import { issueNewGrant, receivesRefreshTokens } from '../issuance.js';
import { DEVICE_CODE_GRANT } from '../metadata.js';
import type { TokenResponse } from '../token-response.js';
import { hashOpaque } from '../tokens.js';
import { assessRedeemer } from '../device/proximity.js';
import type { GrantContext } from './types.js';

export const grantType = DEVICE_CODE_GRANT;

export const parameters = z.object({
  device_code: z.string().min(1).max(512),
});

const DENIAL_TEXT = {
  user_denied: 'the user denied the request',
  wrong_phrase: 'the user picked a confirmation phrase that was not shown on this device; the request was cancelled',
  user_banned: 'the user may not sign in',
  policy: "the service's policy refused a request from where this one came from",
  redeemer_mismatch: "the service's policy refused to deliver tokens to where this poll came from; the request was cancelled",
} as const;

/** Most polls' answer, the same every time: made once rather than on each of them. */
const STILL_PENDING = Object.freeze(authorizationPending('the user has not finished yet'));

const POLL_WITHOUT_KEY = Object.freeze(
  keyNotProven('token_endpoint', 'this device_code is bound to a DPoP key; every poll must carry a proof of that key'),
);

/**
 * RFC 8628 §3.4 / §3.5. Every poll is one statement that records it and applies slow_down; only
 * the poll that finds the request approved opens a transaction, which flips it to redeemed and
 * stores the tokens together, so an approval is never lost and never delivered twice.
 */
export async function handle(deps: Deps, client: Client, form: z.output<typeof parameters>, context: GrantContext): Promise<TokenResponse> {
  const now = deps.clock.now();
  const deviceCodeHash = hashOpaque(form.device_code);
  const poll = await recordDevicePoll(deps.db, deviceCodeHash, client.clientId, context.dpopJkt, now);
  // Another client's device_code is indistinguishable from an unknown one.
  if (!poll) {
    // draft-parecki-oauth-dpop-device-flow: a request bound at its start answers only polls that
    // prove its key, and records nothing of the others; the same answer whatever its state.
    if (await isDeviceRequestBound(deps.db, deviceCodeHash, client.clientId)) throw POLL_WITHOUT_KEY;
    await refuseIfDisabled(deps.clients, client);
    throw invalidGrant('unknown device_code');
  }
  if (poll.client_disabled) throw invalidClient(DISABLED_APP);
  // Issue 28 §2: the proof is recorded as used only now, the request found (the app's, and of the
  // proof's key if bound). Not for a slow_down, which tells nothing and gives nothing: of one proof
  // sent several times at once the database lets one poll through unthrottled, so that poll alone
  // spends it, and it is the one that may redeem.
  const slowDownOnly = poll.throttled && !poll.expired && (poll.status === 'pending' || poll.status === 'approved');
  if (!slowDownOnly) await context.spendProof();
  if (poll.status === 'redeemed') throw invalidGrant('this device_code has already been used');
  if (poll.status === 'denied') throw accessDenied(DENIAL_TEXT[poll.denied_reason ?? 'user_denied']);
  if (poll.expired) throw expiredToken('the device_code has expired; request a new code');
  if (poll.throttled) throw slowDown(`polling too fast; wait at least ${poll.interval_seconds} seconds between polls`);
  if (poll.status === 'pending') throw STILL_PENDING;

  // Issue 27 §3: the poll that would collect the tokens is judged like the request, from what the
  // poll's statement returned and an in-memory lookup: no round trip more.
  const redeemer = assessRedeemer(deps.geo, { requesterIp: poll.requester_ip, approverIp: poll.approver_ip }, context.ip, deps.config);
  if (redeemer.action === 'deny') {
    // Committed on its own: this and every later poll of the request hear access_denied.
    await denyApprovedForRedeemer(deps.db, poll.request_id, context.ip, now);
    throw accessDenied(DENIAL_TEXT.redeemer_mismatch);
  }
  const redeemedBy = { ip: context.ip, action: redeemer.action, signals: redeemer.signals };

  const outcome = await deps.db.transaction().execute(async (trx) => {
    const redeemed = await redeemApprovedRequest(trx, poll.request_id, now);
    if (!redeemed) return { kind: 'lost' as const };
    const user = redeemed.user_id === null ? undefined : await lockUserForIssuance(trx, redeemed.user_id);
    if (!user || user.banned_at !== null || redeemed.user_id === null || redeemed.auth_time === null) {
      // Banned between approval and this poll: the approval turns into a denial, committed.
      await denyRedeemedForBannedUser(trx, poll.request_id, now);
      return { kind: 'banned' as const };
    }
    const issued = await issueNewGrant(trx, deps, {
      client,
      user: { userId: redeemed.user_id, email: user.email, name: user.name },
      scopes: redeemed.scopes,
      authTime: redeemed.auth_time,
      nonce: null,
      withRefreshToken: receivesRefreshTokens(client),
      device: {
        platformName: redeemed.platform_name,
        platformDescription: redeemed.platform_description,
        platformIcon: redeemed.platform_icon,
        // An icon still being fetched at redemption (a few seconds at most) stays off the grant.
        platformIconSha256: redeemed.platform_icon_sha256,
        signedInIp: redeemed.requester_ip,
        approverIp: redeemed.approver_ip,
        redeemer: redeemedBy,
      },
      // The request's key if it was bound (the poll proved it), else the redeeming poll's: RFC 9449 §5.
      dpopJkt: context.dpopJkt,
      issuedBy: {
        reason: 'device_code',
        ip: context.ip,
        details: redeemed.decision_context === null ? null : JSON.stringify(redeemed.decision_context),
      },
      now,
    });
    await setDeviceRequestGrant(trx, poll.request_id, issued.grantId);
    return { kind: 'issued' as const, response: issued.response };
  });

  if (outcome.kind === 'lost') throw invalidGrant('this device_code has already been used');
  if (outcome.kind === 'banned') throw accessDenied(DENIAL_TEXT.user_banned);
  return outcome.response;
}
