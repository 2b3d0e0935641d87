import { createHash } from 'node:crypto';
import { s256Challenge } from '../../src/oauth/pkce.js';

/**
 * The benchmark's data set, derived from row numbers so that the seeding SQL and the load
 * generator agree on every secret without passing a million tokens between processes.
 *
 * Token of kind K and row i: PREFIX + base64url(sha256(`${SEED}:${K}:${i}`)), 43 characters like
 * the server's own 256-bit tokens, and stored as the SHA-256 of the whole string, as the server
 * stores its own.
 */
export const SEED = 'device-auth-bench';

export const TOKEN_KINDS = {
  /** Pending device codes polled by the well-behaved pool. */
  deviceCode: { prefix: 'da_dc_', tag: 'dc' },
  /** Pending device codes hammered by the slow_down variant, apart from the pool. */
  fastDeviceCode: { prefix: 'da_dc_', tag: 'dcfast' },
  /** The current refresh token of grant i (before the benchmark rotates it). */
  refreshToken: { prefix: 'da_rt_', tag: 'rt' },
  /** The live access token of grant i. */
  accessToken: { prefix: 'da_at_', tag: 'at' },
  /** Unredeemed authorization code i of the web app, each redeemed once by the auth-code scenario. */
  authorizationCode: { prefix: 'da_ac_', tag: 'ac' },
} as const;

export type TokenKind = keyof typeof TOKEN_KINDS;

export function benchToken(kind: TokenKind, i: number): string {
  const { prefix, tag } = TOKEN_KINDS[kind];
  return prefix + createHash('sha256').update(`${SEED}:${tag}:${i}`).digest('base64url');
}

/** The same token built in SQL from the row number expression `i` (PostgreSQL 11+ has sha256()). */
export function benchTokenSql(kind: TokenKind, i: string): string {
  const { prefix, tag } = TOKEN_KINDS[kind];
  return `('${prefix}' || rtrim(translate(encode(sha256(convert_to('${SEED}:${tag}:' || (${i})::text, 'UTF8')), 'base64'), '+/', '-_'), '='))`;
}

/** Grants with an odd number carry openid (ID tokens on refresh, userinfo); even ones do not. */
export const OPENID_SCOPES = ['openid', 'profile', 'email', 'offline_access'];
export const PLAIN_SCOPES = ['profile', 'email', 'offline_access'];

/** Grants share users ten to one, as a household shares an account between devices. */
export const GRANTS_PER_USER = 10;

export const TV_CLIENT_ID = 'tv_bench';
/** A confidential resource server that introspects. */
export const RS_CLIENT_ID = 'web_bench_rs';
export const RS_CLIENT_SECRET = `dacs_${createHash('sha256').update(`${SEED}:rs-secret`).digest('base64url')}`;

/**
 * A public web app registered for the authorization-code grant (and refresh tokens, as a web app
 * asking for offline_access would be): its codes carry openid and profile, a sign-in that gets an
 * access token and an ID token and, without offline_access, no refresh token.
 */
export const WEB_CLIENT_ID = 'web_bench_app';
export const WEB_REDIRECT_URI = 'https://app.bench.invalid/callback';
export const AUTH_CODE_SCOPES = ['openid', 'profile'];
/** One PKCE verifier (RFC 7636: 43 unreserved characters) for every code; each code row holds its S256 challenge. */
export const AUTH_CODE_VERIFIER = createHash('sha256').update(`${SEED}:pkce-verifier`).digest('base64url');
export const AUTH_CODE_CHALLENGE = s256Challenge(AUTH_CODE_VERIFIER);

export function basicAuthorization(clientId: string, secret: string): string {
  return `Basic ${Buffer.from(`${encodeURIComponent(clientId)}:${encodeURIComponent(secret)}`).toString('base64')}`;
}

/** Rows of the ceiling's UPDATE table. */
export const CEILING_ROWS = 20_000;
