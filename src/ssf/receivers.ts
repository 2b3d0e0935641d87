import type { Deps } from '../deps.js';
import { verifyAppAccessToken } from '../oauth/access-token-verification.js';
import { acceptPresentedToken, parseAuthorization, type PresentationRequest } from '../oauth/token-presentation.js';
import type { ProofDeps } from '../oauth/dpop.js';
import { scopeMissing, tokenMissing, tokenRefused } from './errors.js';
import { SCOPE_TO_MANAGE, SCOPE_TO_READ } from './vocabulary.js';

/** The app calling a Shared Signals endpoint, as its token says: one app, its own streams only. */
export interface Receiver {
  clientId: string;
  scopes: readonly string[];
}

export type RequiredScope = typeof SCOPE_TO_READ | typeof SCOPE_TO_MANAGE;

/**
 * The receiver behind an Authorization header: an app's own live token (the client_credentials
 * grant; a user's token is no receiver's) with the scope the endpoint needs, as Bearer or, for a
 * token bound to a key (an app registered to use DPoP), as DPoP with a proof of that key
 * (RFC 9449 §7, the same rules as userinfo). ssf.manage includes reading. A token in the URL or
 * the body is never looked at (the CAEP interoperability profile).
 */
export async function authenticateReceiver(
  deps: Pick<Deps, 'db' | 'clock'> & ProofDeps,
  authorization: string | undefined,
  request: PresentationRequest,
  scope: RequiredScope,
): Promise<Receiver> {
  if (authorization === undefined) throw tokenMissing();
  const presented = parseAuthorization(authorization);
  if (!presented) throw tokenRefused('bearer', 'malformed Authorization header; expected Bearer <token> or DPoP <token>');
  const found = await acceptPresentedToken(
    deps,
    presented,
    request,
    (token) => verifyAppAccessToken(deps, token),
    (scheme, description) => tokenRefused(scheme, scheme === 'bearer' ? `${description}, or not an app's own token (client_credentials)` : description),
  );
  const granted = found.scopes.includes(SCOPE_TO_MANAGE) || (scope === SCOPE_TO_READ && found.scopes.includes(SCOPE_TO_READ));
  if (!granted) throw scopeMissing(presented.scheme, scope);
  return { clientId: found.clientId, scopes: found.scopes };
}
