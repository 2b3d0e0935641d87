import { compactVerify, createLocalJWKSet, SignJWT } from 'jose';
import type { Deps } from '../deps.js';
import { epochSeconds } from '../lib/clock.js';
import { ID_TOKEN_ALG } from '../keys/signing-keys.js';

export interface IdTokenSubject {
  userId: string;
  email: string;
  name: string | null;
  authTime: Date;
  /**
   * The grant the token is issued for, as `sid` (OpenID Connect Back-Channel Logout 1.0 §2.1): the
   * session a Shared Signals session-revoked names when the grant ends (issue 32 §3).
   */
  grantId: string;
}

/** OpenID Connect Core §2: RS256, kid in the header, claims by granted scope. */
export async function signIdToken(
  deps: Deps,
  clientId: string,
  subject: IdTokenSubject,
  scopes: readonly string[],
  nonce: string | null = null,
): Promise<string> {
  const now = deps.clock.now();
  // In memory: the ring decides from the keys' times and the clock, no database read per token.
  const key = deps.keys.signingKey(now);
  const claims: Record<string, unknown> = { auth_time: epochSeconds(subject.authTime), sid: subject.grantId };
  // OIDC Core §3.1.3.6: the authorization request's nonce, unchanged, so the app can tie the token to its request.
  if (nonce !== null) claims.nonce = nonce;
  if (scopes.includes('email')) Object.assign(claims, { email: subject.email, email_verified: false });
  if (scopes.includes('profile') && subject.name) claims.name = subject.name;
  return new SignJWT(claims)
    .setProtectedHeader({ alg: ID_TOKEN_ALG, kid: key.kid, typ: 'JWT' })
    .setIssuer(deps.config.issuer)
    .setSubject(subject.userId)
    .setAudience(clientId)
    .setIssuedAt(epochSeconds(now))
    .setExpirationTime(epochSeconds(now) + deps.config.idTokenTtl)
    .sign(key.privateKey);
}

/**
 * Far more than an ID token of ours needs (under 1.5 KiB with every claim); a longer hint is
 * refused before any parsing, so a huge one costs nothing.
 */
const MAX_ID_TOKEN_HINT_LENGTH = 4096;
const COMPACT_JWS = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;

/** Who an ID token we issued names, and for which app. */
export interface IdTokenHint {
  subject: string;
  clientId: string;
}

/**
 * OpenID Connect RP-Initiated Logout 1.0 §2: an id_token_hint is an ID token this server issued,
 * "with the OP as the issuer": its signature is checked against our published keys (those of the
 * JWKS, so a retired key still counts until the tokens it signed have expired) and its iss must be
 * ours. Its expiry is NOT checked: §2 allows an expired ID token as a hint, since an app often asks
 * to sign out long after it signed in. Null when it is not such a token.
 */
export async function verifyIdTokenHint(deps: Pick<Deps, 'keys' | 'config'>, hint: string): Promise<IdTokenHint | null> {
  if (hint.length > MAX_ID_TOKEN_HINT_LENGTH || !COMPACT_JWS.test(hint)) return null;
  let claims: Record<string, unknown>;
  try {
    const verified = await compactVerify(hint, createLocalJWKSet(deps.keys.jwks()), { algorithms: [ID_TOKEN_ALG] });
    claims = JSON.parse(new TextDecoder().decode(verified.payload)) as Record<string, unknown>;
  } catch {
    return null;
  }
  if (claims === null || typeof claims !== 'object' || claims.iss !== deps.config.issuer || typeof claims.sub !== 'string') return null;
  // Ours always name one audience, as a string; an array of that one app is the same statement.
  const audience = Array.isArray(claims.aud) && claims.aud.length === 1 ? claims.aud[0] : claims.aud;
  if (typeof audience !== 'string') return null;
  return { subject: claims.sub, clientId: audience };
}
