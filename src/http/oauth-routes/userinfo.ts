import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Deps } from '../../deps.js';
import { verifyAccessToken } from '../../oauth/access-token-verification.js';
import { dpopChallenge, dpopNonceHeader } from '../../oauth/dpop.js';
import { OAuthError, invalidRequest, invalidToken } from '../../oauth/errors.js';
import { endpoints } from '../../oauth/metadata.js';
import { acceptPresentedToken, parseAuthorization, type PresentedToken, type Scheme } from '../../oauth/token-presentation.js';
import { consumeOAuthLimit, limitedAddress } from '../rate-limit.js';

/**
 * RFC 6750 and RFC 9449 §7: the access token is accepted in the Authorization header only, as
 * Bearer or, with a proof, as DPoP. A token in the query or the body is refused, because URLs and
 * bodies end up in logs and histories.
 */
function presentedToken(request: FastifyRequest): PresentedToken {
  const query = request.query as Record<string, unknown> | undefined;
  const body = request.body as Record<string, unknown> | undefined;
  if ((query && 'access_token' in query) || (body && typeof body === 'object' && 'access_token' in body)) {
    throw invalidRequest('send the access token in the Authorization header (Bearer or DPoP), never in the URL or body');
  }
  const header = request.headers.authorization;
  if (!header) {
    // RFC 6750 §3.1: no error code when the request carried no authentication at all; RFC 9449 §7.1: both schemes offered.
    throw new OAuthError('invalid_request', 'an access token is required in the Authorization header (Bearer or DPoP)', 401, {
      'WWW-Authenticate': `Bearer realm="device-auth", ${dpopChallenge(null)}`,
    });
  }
  const presented = parseAuthorization(header);
  if (!presented) throw invalidToken('malformed Authorization header; expected Bearer <token> or DPoP <token>');
  return presented;
}

/** The refusal of a token in the challenge of the scheme it came with. */
function tokenRefused(scheme: Scheme, description: string): OAuthError {
  if (scheme === 'bearer') return invalidToken(description);
  return new OAuthError('invalid_token', description, 401, { 'WWW-Authenticate': dpopChallenge('invalid_token', description) });
}

export function userinfoRoutes(app: FastifyInstance, deps: Deps): void {
  const url = endpoints(deps.config.issuer).userinfo_endpoint;
  const lookUp = (value: string) => verifyAccessToken(deps, value);
  // OpenID Connect Core §5.3
  const handler = async (request: FastifyRequest) => {
    // Before any other work, as at the token endpoint: a flood from one address (an IPv6 /64) is
    // refused before its token is looked up or its proof checked.
    const perAddress = consumeOAuthLimit(deps, 'userinfoPerIp', limitedAddress(deps, request));
    if (perAddress) await perAddress;
    const presented = presentedToken(request);
    const { scheme } = presented;
    const token = await acceptPresentedToken(deps, presented, { dpop: request.headers.dpop, method: request.method, url }, lookUp, tokenRefused);
    if (!token.scopes.includes('openid')) {
      throw new OAuthError('insufficient_scope', 'the access token was not granted the openid scope', 403, {
        'WWW-Authenticate':
          scheme === 'bearer'
            ? 'Bearer realm="device-auth", error="insufficient_scope", scope="openid"'
            : `${dpopChallenge('insufficient_scope')}, scope="openid"`,
      });
    }
    return {
      sub: token.userId,
      ...(token.scopes.includes('profile') && token.name ? { name: token.name } : {}),
      ...(token.scopes.includes('email') ? { email: token.email, email_verified: false } : {}),
    };
  };
  const reply = async (request: FastifyRequest, response: FastifyReply) => {
    const claims = await handler(request);
    return response.header('Cache-Control', 'no-store').headers(dpopNonceHeader(deps)).send(claims);
  };
  app.get('/oauth/userinfo', reply);
  app.post('/oauth/userinfo', reply);
}
