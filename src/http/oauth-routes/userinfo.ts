import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Deps } from '../../deps.js';
import { verifyAccessToken } from '../../oauth/access-token-verification.js';
import { dpopChallenge, dpopNonceHeader, keyNotProven, readDpopProof, spendDpopProof, verifyReadProof } from '../../oauth/dpop.js';
import { OAuthError, invalidRequest, invalidToken } from '../../oauth/errors.js';
import { endpoints } from '../../oauth/metadata.js';
import { consumeOAuthLimit, limitedAddress } from '../rate-limit.js';

/** RFC 6750 §2.1 b64token after the scheme, which RFC 7235 §2.1 makes case-insensitive. */
const AUTHORIZATION = /^(Bearer|DPoP) ([A-Za-z0-9\-._~+/]+=*)$/i;

type Scheme = 'bearer' | 'dpop';

/**
 * RFC 6750 and RFC 9449 §7: the access token is accepted in the Authorization header only, as
 * Bearer or, with a proof, as DPoP. A token in the query or the body is refused, because URLs and
 * bodies end up in logs and histories.
 */
function presentedToken(request: FastifyRequest): { scheme: Scheme; token: string } {
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
  const match = AUTHORIZATION.exec(header);
  if (!match?.[1] || !match[2]) throw invalidToken('malformed Authorization header; expected Bearer <token> or DPoP <token>');
  return { scheme: match[1].toLowerCase() === 'dpop' ? 'dpop' : 'bearer', token: match[2] };
}

/** The refusal of a token in the challenge of the scheme it came with. */
function tokenRefused(scheme: Scheme, description: string): OAuthError {
  if (scheme === 'bearer') return invalidToken(description);
  return new OAuthError('invalid_token', description, 401, { 'WWW-Authenticate': dpopChallenge('invalid_token', description) });
}

export function userinfoRoutes(app: FastifyInstance, deps: Deps): void {
  const url = endpoints(deps.config.issuer).userinfo_endpoint;
  // OpenID Connect Core §5.3
  const handler = async (request: FastifyRequest) => {
    // Before any other work, as at the token endpoint: a flood from one address (an IPv6 /64) is
    // refused before its token is looked up or its proof checked.
    const perAddress = consumeOAuthLimit(deps, 'userinfoPerIp', limitedAddress(deps, request));
    if (perAddress) await perAddress;
    const { scheme, token: value } = presentedToken(request);
    // RFC 9449 §7.1: under the DPoP scheme the proof, with ath naming this token, comes first: its
    // claims at once, its signature only once the token turned out to be live (a junk token costs
    // no public-key operation), and it is recorded as used only once the token is also bound to its
    // key, so proofs sent with a junk token write nothing (issue 28 §2).
    const read = scheme === 'dpop' ? readDpopProof(deps, { header: request.headers.dpop, method: request.method, url, accessToken: value }, 'resource') : null;
    if (scheme === 'dpop' && !read) throw keyNotProven('resource', 'the DPoP scheme needs a DPoP proof header');
    const token = await verifyAccessToken(deps, value);
    if (!token) throw tokenRefused(scheme, 'the access token is invalid, expired or revoked');
    const proof = read && (await verifyReadProof(deps, read, 'resource'));
    if (token.dpopJkt !== null) {
      // RFC 9449 §7.2: a bound token presented as Bearer is refused, whoever presents it.
      if (!proof) throw tokenRefused('dpop', 'this access token is bound to a DPoP key: present it with Authorization: DPoP and a proof');
      if (proof.jkt !== token.dpopJkt) throw tokenRefused('dpop', "the DPoP proof's key is not the key this access token is bound to");
      await spendDpopProof(deps, proof, 'resource');
    } else if (proof) {
      // A proof of a key says nothing about a token bound to none; presented so, it is refused rather than half-checked.
      throw tokenRefused('dpop', 'this access token is not bound to a DPoP key: present it as Bearer');
    }
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
