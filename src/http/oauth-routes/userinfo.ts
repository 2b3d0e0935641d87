import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Deps } from '../../deps.js';
import { verifyAccessToken } from '../../oauth/access-tokens.js';
import { OAuthError, invalidRequest, invalidToken } from '../../oauth/errors.js';

const BEARER = /^Bearer ([A-Za-z0-9\-._~+/]+=*)$/;

/**
 * RFC 6750: the access token is accepted in the Authorization header only. A token in the query
 * or the body is refused, because URLs and bodies end up in logs and histories.
 */
function bearerToken(request: FastifyRequest): string {
  const query = request.query as Record<string, unknown> | undefined;
  const body = request.body as Record<string, unknown> | undefined;
  if ((query && 'access_token' in query) || (body && typeof body === 'object' && 'access_token' in body)) {
    throw invalidRequest('send the access token in the Authorization: Bearer header, never in the URL or body');
  }
  const header = request.headers.authorization;
  if (!header) {
    // RFC 6750 §3.1: no error code when the request carried no authentication at all.
    throw new OAuthError('invalid_request', 'an access token is required in the Authorization: Bearer header', 401, {
      'WWW-Authenticate': 'Bearer realm="device-auth"',
    });
  }
  const match = BEARER.exec(header);
  if (!match?.[1]) throw invalidToken('malformed Authorization header; expected Bearer <token>');
  return match[1];
}

export function userinfoRoutes(app: FastifyInstance, deps: Deps): void {
  // OpenID Connect Core §5.3
  const handler = async (request: FastifyRequest) => {
    const token = await verifyAccessToken(deps, bearerToken(request));
    if (!token) throw invalidToken('the access token is invalid, expired or revoked');
    if (!token.scopes.includes('openid')) {
      throw new OAuthError('insufficient_scope', 'the access token was not granted the openid scope', 403, {
        'WWW-Authenticate': 'Bearer realm="device-auth", error="insufficient_scope", scope="openid"',
      });
    }
    return {
      sub: token.userId,
      ...(token.scopes.includes('profile') && token.name ? { name: token.name } : {}),
      ...(token.scopes.includes('email') ? { email: token.email, email_verified: false } : {}),
    };
  };
  app.get('/oauth/userinfo', async (request, reply) => reply.header('Cache-Control', 'no-store').send(await handler(request)));
  app.post('/oauth/userinfo', async (request, reply) => reply.header('Cache-Control', 'no-store').send(await handler(request)));
}
