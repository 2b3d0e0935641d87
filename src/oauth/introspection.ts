import type { Deps } from '../deps.js';
import { epochSeconds } from '../lib/clock.js';
import { verifyAccessToken } from './access-tokens.js';
import { invalidClient } from './errors.js';
import type { Client } from './client-auth.js';
import { formatScope } from './scopes.js';

/** RFC 7662 §2.2. */
export type IntrospectionResponse =
  | { active: false }
  | {
      active: true;
      scope: string;
      client_id: string;
      sub: string;
      token_type: 'Bearer';
      exp: number;
      iat: number;
      aud: string;
      iss: string;
    };

/**
 * RFC 7662 §2.2: access tokens only. A refresh token is never sent to a resource server, so it
 * is `active: false` here like anything unknown, expired, revoked, or of a banned user or a
 * disabled app: one answer, with no hint why. Liveness is the same indexed join that userinfo
 * uses, read on every call, so a revocation shows on the very next request.
 */
export async function introspectToken(deps: Deps, caller: Client, token: string): Promise<IntrospectionResponse> {
  // RFC 7662 §2.1: callers authenticate; resource servers are confidential clients, and a public
  // client_id proves nothing.
  if (caller.type !== 'confidential') throw invalidClient('introspection needs a confidential client authenticating with HTTP Basic');
  const live = await verifyAccessToken(deps, token);
  if (!live) return { active: false };
  return {
    active: true,
    scope: formatScope(live.scopes),
    client_id: live.clientId,
    sub: live.userId,
    token_type: 'Bearer',
    exp: epochSeconds(live.expiresAt),
    iat: epochSeconds(live.issuedAt),
    aud: live.clientId,
    iss: deps.config.issuer,
  };
}
