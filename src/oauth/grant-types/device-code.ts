import { z } from 'zod';
import type { Deps } from '../../deps.js';
import { lockUserForIssuance } from '../../repositories/users.js';
import {
  denyApprovedForRedeemer,
  denyRedeemedForBannedUser,
  devicePollRecorder,
  isDeviceRequestBound,
  redeemApprovedRequest,
  setDeviceRequestGrant,
} from '../../repositories/device-requests.js';
import { refuseIfDisabled, type Client } from '../client-auth.js';
import { accessDenied, invalidGrant } from '../errors.js';
import { approvalOf, placeOrigin } from '../grant-origin.js';
import { issueNewGrant, receivesRefreshTokens } from '../issuance.js';
import { DEVICE_CODE_GRANT } from '../metadata.js';
import type { TokenResponse } from '../token-response.js';
import { hashOpaque } from '../opaque-tokens.js';
import { assessRedeemer } from '../device/proximity.js';
import { ALREADY_USED, DENIAL_TEXT, judgePoll, pollRules, POLL_WITHOUT_KEY } from './device-code.rules.js';
import { countProximityOverrides, refusePollByPolicy, judgeRedemptionScopes } from '../device/policy.js';
import type { GrantContext } from './types.js';

export const grantType = DEVICE_CODE_GRANT;

export const parameters = z.object({
  device_code: z.string().min(1).max(512),
});

/** The recorder of polls, under the grant's rules (made once; its statement is compiled on first use). */
export const recordDevicePoll = devicePollRecorder(pollRules);

/**
 * RFC 8628 §3.4 / §3.5. Every poll is one statement that records it and applies slow_down; only
 * the poll that finds the request approved opens a transaction, which flips it to redeemed and
 * stores the tokens together, so an approval is never lost and never delivered twice.
 */
export async function handle(deps: Deps, client: Client, form: z.output<typeof parameters>, context: GrantContext): Promise<TokenResponse> {
  // Issue 31 §2: the operator's rules judge every poll before its statement, from memory.
  refusePollByPolicy(context.devicePolicy, deps.geo, context.ip);
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
  // Issue 28 §2: the proof is recorded as used only now, the request found (the app's, and of the
  // proof's key if bound), and never for a slow_down or a disabled app (see PollVerdict).
  const verdict = judgePoll(poll);
  if (verdict.spendProof) await context.spendProof();
  if (verdict.refusal) throw verdict.refusal;

  // Issue 27 §3: the poll that would collect the tokens is judged like the request, from what the
  // poll's statement returned and an in-memory lookup: no round trip more.
  const redeemer = assessRedeemer(deps.geo, { requesterIp: poll.requester_ip, approverIp: poll.approver_ip }, context.ip, context.devicePolicy.proximity);
  countProximityOverrides(context.devicePolicy, redeemer.signals);
  if (redeemer.action === 'deny') {
    // Committed on its own: this and every later poll of the request hear access_denied.
    await denyApprovedForRedeemer(deps.db, poll.request_id, context.ip, now);
    throw accessDenied(DENIAL_TEXT.redeemer_mismatch);
  }
  const redeemedBy = { action: redeemer.action, signals: redeemer.signals };

  const outcome = await deps.db.transaction().execute(async (trx) => {
    const redeemed = await redeemApprovedRequest(trx, poll.request_id, now);
    if (!redeemed) return { kind: 'lost' as const };
    // A request approved before a scope rule was enforced: refused, rolled back (still approved).
    judgeRedemptionScopes(context.devicePolicy, redeemed.scopes);
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
        redeemer: redeemedBy,
      },
      // Issue 31 §1: the three places as assessRedeemer located them, and the approval as recorded.
      origin: {
        approvedAt: redeemed.decided_at ?? now,
        requester: redeemed.requester_ip === null ? null : placeOrigin(redeemer.requester),
        approver: redeemed.approver_ip === null ? null : placeOrigin(redeemer.approver),
        redeemer: placeOrigin(redeemer.redeemer),
        ...approvalOf(redeemed.decision_context),
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

  if (outcome.kind === 'lost') throw invalidGrant(ALREADY_USED);
  if (outcome.kind === 'banned') throw accessDenied(DENIAL_TEXT.user_banned);
  return outcome.response;
}
