import type { Deps } from '../deps.js';
import { epochSeconds } from '../lib/clock.js';
import { findLiveAccessTokenForCaller } from '../repositories/access-tokens.js';
import { isOurAccessToken } from './access-token-verification.js';
import { hashOpaque } from './opaque-tokens.js';
import { invalidClient, OAuthError } from './errors.js';
import { DISABLED_APP, type Client } from './client-auth.js';
import { formatScope } from './scopes.js';

/** RFC 7662 §2.2. */
export type IntrospectionResponse =
  | { active: false }
  | {
      active: true;
      scope: string;
      client_id: string;
      sub: string;
      /** The grant, as ID tokens name it (sid) and Shared Signals session-revoked names its session. */
      sid: string;
      token_type: 'Bearer' | 'DPoP';
      /** RFC 9449 §6.2: the key a DPoP-bound token is bound to. */
      cnf?: { jkt: string };
      exp: number;
      iat: number;
      aud: string;
      iss: string;
    };

/**
 * RFC 7662 §4: a token's user and scopes are for the resource servers it is meant for, not for
 * every app with a secret (a bot on a user's machine has one). 403, not 401: the client did
 * authenticate, it just may not ask; and the refusal comes before the token is looked at, so it
 * says nothing about the token.
 */
const NOT_A_RESOURCE_SERVER = 'this client is not registered as a resource server and may not introspect tokens';

/** Matches no stored token: a value that is not ours still costs the same single round trip. */
const NO_SUCH_HASH = Buffer.alloc(32);

/**
 * RFC 7662 §2.1: callers authenticate; resource servers are confidential clients, and a public
 * client_id proves nothing. Without the database: the endpoint asks before it charges the app's
 * budget, so a caller refused for what it is never uses it.
 */
export function requireResourceServer(caller: Client): void {
  if (caller.type !== 'confidential') throw invalidClient('introspection needs a confidential client authenticating with HTTP Basic');
  if (!caller.mayIntrospect) throw new OAuthError('unauthorized_client', NOT_A_RESOURCE_SERVER, 403);
}

/**
 * RFC 7662 §2.2: access tokens only. A refresh token is never sent to a resource server, so it
 * is `active: false` here like anything unknown, expired, revoked, or of a banned user or a
 * disabled app: one answer, with no hint why. Liveness is the same indexed join that userinfo
 * uses, read on every call, so a revocation shows on the very next request.
 */
export async function introspectToken(deps: Deps, caller: Client, token: string): Promise<IntrospectionResponse> {
  // The endpoint asked already; asked again (two comparisons) so that no caller can skip it.
  requireResourceServer(caller);
  // One round trip: the token's liveness and whether the caller's app is still enabled.
  const hash = isOurAccessToken(token) ? hashOpaque(token) : NO_SUCH_HASH;
  const found = await findLiveAccessTokenForCaller(deps.db, hash, deps.clock.now(), caller.clientId);
  if (!found?.caller_enabled) throw invalidClient(DISABLED_APP);
  if (found.grant_id === null || found.expires_at === null || found.created_at === null) return { active: false };
  return {
    active: true,
    scope: formatScope(found.scopes ?? []),
    client_id: found.client_id!,
    sub: found.user_id!,
    sid: found.grant_id,
    token_type: found.dpop_jkt ? 'DPoP' : 'Bearer',
    ...(found.dpop_jkt ? { cnf: { jkt: found.dpop_jkt } } : {}),
    exp: epochSeconds(found.expires_at),
    iat: epochSeconds(found.created_at),
    aud: found.client_id!,
    iss: deps.config.issuer,
  };
}
