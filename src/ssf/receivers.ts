import type { Deps } from '../deps.js';
import { verifyAppAccessToken } from '../oauth/access-token-verification.js';
import { scopeMissing, tokenMissing, tokenRefused } from './errors.js';
import { SCOPE_TO_MANAGE, SCOPE_TO_READ } from './vocabulary.js';

/** The app calling a Shared Signals endpoint, as its token says: one app, its own streams only. */
export interface Receiver {
  clientId: string;
  scopes: readonly string[];
}

/** RFC 6750 §2.1 b64token, case-insensitive scheme (RFC 7235 §2.1). */
const BEARER = /^Bearer ([A-Za-z0-9\-._~+/]+=*)$/i;

export type RequiredScope = typeof SCOPE_TO_READ | typeof SCOPE_TO_MANAGE;

/**
 * The receiver behind an Authorization header: an app's own live token (the client_credentials
 * grant; a user's token is no receiver's) with the scope the endpoint needs. ssf.manage includes
 * reading. A token in the URL or the body is never looked at (the CAEP interoperability profile).
 */
export async function authenticateReceiver(deps: Pick<Deps, 'db' | 'clock'>, authorization: string | undefined, scope: RequiredScope): Promise<Receiver> {
  if (authorization === undefined) throw tokenMissing();
  const token = BEARER.exec(authorization)?.[1];
  if (token === undefined) throw tokenRefused('malformed Authorization header; expected Bearer <token>');
  const found = await verifyAppAccessToken(deps, token);
  if (!found) throw tokenRefused("the access token is invalid, expired or revoked, or not an app's own token (client_credentials)");
  const granted = found.scopes.includes(SCOPE_TO_MANAGE) || (scope === SCOPE_TO_READ && found.scopes.includes(SCOPE_TO_READ));
  if (!granted) throw scopeMissing(scope);
  return { clientId: found.clientId, scopes: found.scopes };
}
