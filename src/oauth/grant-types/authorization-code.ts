import { z } from 'zod';
import type { Deps } from '../../deps.js';
import {
  findRedeemedAuthorizationCode,
  redeemAuthorizationCode,
  setAuthorizationCodeGrant,
} from '../../repositories/authorization-codes.js';
import { lockUserForIssuance } from '../../repositories/users.js';
import { refuseIfDisabled, type Client } from '../client-auth.js';
import { invalidGrant } from '../errors.js';
import { revokeAndCountGrants } from '../grant-revocation.js';
import { issueNewGrant, receivesRefreshTokens } from '../issuance.js';
import { AUTHORIZATION_CODE_GRANT } from '../metadata.js';
import { challengeOfVerifier } from '../pkce.js';
import type { TokenResponse } from '../token-response.js';
import { hashOpaque, TOKEN_PREFIX } from '../tokens.js';
import type { GrantContext } from './types.js';

export const grantType = AUTHORIZATION_CODE_GRANT;

export const parameters = z.object({
  code: z.string().min(1),
  redirect_uri: z.string().optional(),
  code_verifier: z.string().optional(),
});

/**
 * One answer for every code that does not give tokens (unknown, another app's, expired, used,
 * a wrong redirect_uri or PKCE verifier): which of them it was would only help whoever holds a
 * code that is not theirs.
 */
const REFUSED =
  'the authorization code is invalid, expired or already used, or the redirect_uri, code_verifier or DPoP key does not match it';

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
  if (!form.code.startsWith(TOKEN_PREFIX.authorizationCode) || form.code.length > 256) {
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
  const now = deps.clock.now();
  const redemption = await deps.db.transaction().execute(async (trx): Promise<Redemption> => {
    const code = await redeemAuthorizationCode(trx, codeHash, client.clientId, codeChallenge, now);
    if (!code) {
      const spent = await findRedeemedAuthorizationCode(trx, codeHash, client.clientId, codeChallenge);
      return spent ? { kind: 'replayed', grantId: spent.grant_id } : { kind: 'refused' };
    }
    if (code.expires_at.getTime() <= now.getTime()) return { kind: 'refused' };
    // OAuth 2.1 §4.1.3: the redirect_uri, if the request had one (ours always do), exactly as sent.
    if (form.redirect_uri !== code.redirect_uri) return { kind: 'refused' };
    // RFC 9449 §10: a code requested with dpop_jkt is redeemed only with a proof of that key.
    if (code.dpop_jkt !== null && code.dpop_jkt !== context.dpopJkt) return { kind: 'refused' };
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
      issuedBy: { reason: 'authorization_code', ip: context.ip, details: null },
      // The code's key if it had one (the proof matched it), else the proof's: RFC 9449 §5.
      dpopJkt: context.dpopJkt,
      now,
    });
    await setAuthorizationCodeGrant(trx, codeHash, issued.grantId);
    return { kind: 'issued', response: issued.response };
  });

  // Issue 28 §2: the proof is recorded as used only once the code was found, the app's with its
  // verifier (and of the proof's key if bound), after the transaction (the store may not write in
  // one). A second redemption with the same proof waits on the code's row and looks the code up
  // before it can try to spend the proof, so the first one records it first; were it ever the
  // other way, the replay revokes and the first answers invalid_dpop_proof: never two answers with tokens.
  if (redemption.kind === 'issued') {
    await context.spendProof();
    return redemption.response;
  }
  if (redemption.kind === 'replayed' && redemption.grantId !== null) {
    // Before the revocation: a replayed proof revokes nothing.
    await context.spendProof();
    await revokeAndCountGrants(deps, { grantId: redemption.grantId }, 'code_replayed', context.ip);
  }
  // Only on the way out: a disabled app redeems nothing (the redeeming statement checks it) and is told why.
  await refuseIfDisabled(deps.clients, client);
  throw invalidGrant(REFUSED);
}
