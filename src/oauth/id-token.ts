import { SignJWT } from 'jose';
import type { Deps } from '../deps.js';
import { epochSeconds } from '../lib/clock.js';
import { ID_TOKEN_ALG } from './keys.js';

export interface IdTokenSubject {
  userId: string;
  email: string;
  name: string | null;
  authTime: Date;
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
  const claims: Record<string, unknown> = { auth_time: epochSeconds(subject.authTime) };
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
