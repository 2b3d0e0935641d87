import { z } from 'zod';
import type { Deps } from '../../deps.js';
import {
  findAuthorizationCodeOfApp,
  findRedeemedAuthorizationCode,
  redeemAuthorizationCode,
  setAuthorizationCodeGrant,
} from '../../repositories/authorization-codes.js';
import { lockUserForIssuance } from '../../repositories/users.js';
import { refuseIfDisabled, type Client } from '../client-auth.js';
import { invalidGrant } from '../errors.js';
import { revokeAndCountGrants } from '../grant-revocation.js';
import { placeOrigin } from '../grant-origin.js';
import { issueNewGrant, receivesRefreshTokens } from '../issuance.js';
import { AUTHORIZATION_CODE_GRANT } from '../metadata.js';
import { challengeOfVerifier } from '../pkce.js';
import type { TokenResponse } from '../token-response.js';
import { hashOpaque } from '../opaque-tokens.js';
import { keyProven } from './key-binding.js';
import { codeMisfit, couldBeOurCode, REFUSED } from './authorization-code.rules.js';
import type { GrantContext } from './types.js';

export const grantType = AUTHORIZATION_CODE_GRANT;

export const parameters = z.object({
  code: z.string().min(1),
  redirect_uri: z.string().optional(),
  code_verifier: z.string().optional(),
});

type Redemption = { kind: 'issued'; response: TokenResponse } | { kind: 'refused' } | { kind: 'replayed'; grantId: string | null };

/**
 * OAuth 2.1 §4.1.3 / RFC 6749 §4.1.3. The code is redeemed by one statement, so of any number of
 * concurrent redemptions exactly one gets it. That statement names the app and the PKCE challenge
 * of the verifier given (RFC 7636 §4.6), so whoever sees a code but has not its verifier can
 * neither spend it before the app nor, after, revoke the app's grant by replaying it (issue 28 §4);
 * it also checks that the app is enabled. What follows (redirect_uri, expiry, DPoP key) spends the
 * code when it refuses. A later redemption of a spent code, with its verifier, means the code leaked: every token the
 * first one issued is revoked with its grant (RFC 6749 §4.1.2). The first redemption's grant is
 * recorded in the same transaction that issues it, and a second redemption waits on the code's
 * row until that transaction ends, so it always finds the grant to revoke.
 */
export async function handle(deps: Deps, client: Client, form: z.output<typeof parameters>, context: GrantContext): Promise<TokenResponse> {
  if (!couldBeOurCode(form.code)) {
    await refuseIfDisabled(deps.clients, client);
    throw invalidGrant(REFUSED);
  }
  // RFC 7636 §4.6: a verifier of the wrong shape matches no code; nothing to look up.
  const codeChallenge = challengeOfVerifier(form.code_verifier);
  if (codeChallenge === null) {
    await refuseIfDisabled(deps.clients, client);
    throw invalidGrant(REFUSED);
  }
  const codeHash = hashOpaque(form.code);
  // Issue 28 §2: a proof is recorded as used once the code was found, the app's with its verifier
  // and of the proof's key if bound, and before the code is redeemed. Of concurrent redemptions
  // with one proof, the one that records it is the only one that can go on: a redemption that
  // waited for the first one's commit finds the proof used and cannot take the replay path, which
  // would revoke what the first one issued. A bound code with another key keeps its proof unspent.
  let proofSpent = false;
  if (context.dpopJkt !== null) {
    const held = await findAuthorizationCodeOfApp(deps.db, codeHash, client.clientId, codeChallenge);
    if (!held) {
      await refuseIfDisabled(deps.clients, client);
      throw invalidGrant(REFUSED);
    }
    if (keyProven(held.dpop_jkt, context.dpopJkt)) {
      await context.spendProof();
      proofSpent = true;
    }
  }
  const now = deps.clock.now();
  const redemption = await deps.db.transaction().execute(async (trx): Promise<Redemption> => {
    const code = await redeemAuthorizationCode(trx, codeHash, client.clientId, codeChallenge, now);
    if (!code) {
      const spent = await findRedeemedAuthorizationCode(trx, codeHash, client.clientId, codeChallenge);
      return spent ? { kind: 'replayed', grantId: spent.grant_id } : { kind: 'refused' };
    }
    // Expired, another redirect_uri, a bound code without its key: spent all the same.
    if (codeMisfit(code, { redirectUri: form.redirect_uri, dpopJkt: context.dpopJkt, now }) !== null) return { kind: 'refused' };
    const user = await lockUserForIssuance(trx, code.user_id);
    if (!user || user.banned_at !== null) return { kind: 'refused' };
    const issued = await issueNewGrant(trx, deps, {
      client,
      user: { userId: code.user_id, email: user.email, name: user.name },
      scopes: code.scopes,
      authTime: code.auth_time,
      nonce: code.nonce,
      // Web apps get a refresh token only when the user agreed to offline_access (OIDC Core §11).
      withRefreshToken: receivesRefreshTokens(client) && code.scopes.includes('offline_access'),
      device: null,
      // Issue 31 §1: where the user signed in and agreed (the code was issued then), located in memory.
      origin: {
        approvedAt: code.created_at,
        requester: code.signed_in_ip === null ? null : placeOrigin(deps.geo.locate(code.signed_in_ip)),
        approver: null,
        redeemer: null,
        approvalSignals: null,
        decision: null,
        confirmed: null,
      },
      issuedBy: { reason: 'authorization_code', ip: context.ip, details: null },
      // The code's key if it had one (the proof matched it), else the proof's: RFC 9449 §5.
      dpopJkt: context.dpopJkt,
      now,
    });
    await setAuthorizationCodeGrant(trx, codeHash, issued.grantId);
    return { kind: 'issued', response: issued.response };
  });

  if (redemption.kind === 'issued') return redemption.response;
  if (redemption.kind === 'replayed' && redemption.grantId !== null) {
    // Before the revocation: a replayed proof revokes nothing.
    if (!proofSpent) await context.spendProof();
    await revokeAndCountGrants(deps, { grantId: redemption.grantId }, 'code_replayed', context.ip);
  }
  // Only on the way out: a disabled app redeems nothing (the redeeming statement checks it) and is told why.
  await refuseIfDisabled(deps.clients, client);
  throw invalidGrant(REFUSED);
}
