import { TOKEN_PREFIX } from '../opaque-tokens.js';
import { keyProven } from './key-binding.js';

/**
 * The authorization code grant's rules (OAuth 2.1 §4.1.3, RFC 6749 §4.1.2, RFC 7636 §4.6,
 * RFC 9449 §10), in one place. The redeeming statement (repositories/authorization-codes.ts)
 * checks what it must check to be once-only: the code of this app, with the PKCE challenge of the
 * verifier given, not yet redeemed, the app enabled. What it returns is then checked here.
 */

/**
 * One answer for every code that does not give tokens (unknown, another app's, expired, used,
 * a wrong redirect_uri or PKCE verifier): which of them it was would only help whoever holds a
 * code that is not theirs.
 */
export const REFUSED = 'the authorization code is invalid, expired or already used, or the redirect_uri, code_verifier or DPoP key does not match it';

/** Longer than any code we issue. */
const MAX_CODE_LENGTH = 256;

/** Whether a value could be a code we issued; anything else is refused without a lookup. */
export function couldBeOurCode(value: string): boolean {
  return value.startsWith(TOKEN_PREFIX.authorizationCode) && value.length <= MAX_CODE_LENGTH;
}

/** What the redeeming statement returned of the code it redeemed. */
export interface RedeemedCode {
  expires_at: Date;
  redirect_uri: string;
  dpop_jkt: string | null;
}

/** What the redemption request brought. */
export interface Redeemer {
  /** The redirect_uri of the token request, if it had one. */
  redirectUri: string | undefined;
  /** The key of the request's DPoP proof, or null. */
  dpopJkt: string | null;
  now: Date;
}

/** Why a redeemed code gives no tokens (every reason answers the same REFUSED), or null when it does. */
export type CodeMisfit = 'expired' | 'redirect_uri' | 'dpop_key';

/**
 * The checks of a redeemed code, in their order: unexpired; the redirect_uri exactly as sent when
 * the code was requested (OAuth 2.1 §4.1.3: ours always send one); a code requested with dpop_jkt
 * only with a proof of that key (RFC 9449 §10). A code that fails one is spent all the same.
 */
export function codeMisfit(code: RedeemedCode, redeemer: Redeemer): CodeMisfit | null {
  if (code.expires_at.getTime() <= redeemer.now.getTime()) return 'expired';
  if (redeemer.redirectUri !== code.redirect_uri) return 'redirect_uri';
  if (!keyProven(code.dpop_jkt, redeemer.dpopJkt)) return 'dpop_key';
  return null;
}
