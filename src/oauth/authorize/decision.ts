import type { Deps } from '../../deps.js';
import { addSeconds } from '../../lib/clock.js';
import { insertAuthorizationCode } from '../../repositories/authorization-codes.js';
import { findConsent, rememberConsent } from '../../repositories/consents.js';
import { mintOpaque, TOKEN_PREFIX } from '../opaque-tokens.js';
import { authorizeQueryString, redirectWith, type AuthorizationRequest, type AuthorizeErrorCode } from './request.js';

/** OAuth 2.1 §4.1.2: a code lives minutes at most; the service description says 5. */
const AUTHORIZATION_CODE_TTL_SECONDS = 300;

export const AUTHORIZE_PATH = '/oauth/authorize';

/**
 * Who is signed in, as far as an authorization decision needs to know: whose code it is and when
 * they proved it (auth_time). The browser session (accounts/sessions.ts AuthenticatedUser) is one; the
 * protocol names only what it reads, so it never imports the user's side.
 */
export interface AuthenticatedUser {
  userId: string;
  authTime: Date;
}

/** What the decision reads of the dependencies. */
type DecisionDeps = Pick<Deps, 'db' | 'clock' | 'config' | 'metrics' | 'geo'>;

export type AuthorizeOutcome =
  /** To the app's registered redirect URI: a code, or an error. */
  | { kind: 'redirect'; location: string }
  /** To the sign-in page, coming back to `returnTo`; `again` asks a signed-in user for the password anyway. */
  | { kind: 'sign_in'; returnTo: string; again: boolean }
  /** Ask the user; `shared` is what they already agreed to share with this app. */
  | { kind: 'consent'; shared: string[] };

/** An error for the app, with state and iss (RFC 9207), at the redirect URI it registered. */
export function errorRedirect(
  deps: DecisionDeps,
  request: Pick<AuthorizationRequest, 'redirectUri' | 'state'>,
  error: AuthorizeErrorCode,
  description: string,
): AuthorizeOutcome {
  deps.metrics.authorizationResponses.inc({ outcome: error });
  return {
    kind: 'redirect',
    location: redirectWith(request.redirectUri, { error, error_description: description, state: request.state, iss: deps.config.issuer }),
  };
}

/**
 * What a valid request needs next, given who is signed in (OIDC Core §3.1.2.3): sign-in (prompt=login,
 * an auth_time older than max_age, or nobody), consent (prompt=consent, or scopes not yet agreed
 * to), or nothing, in which case the code goes straight back. prompt=none never shows a page.
 */
/** `browserIp`: where the user is, kept with the code and then on its grant as where it signed in (issue 31 §1). */
export async function decideAuthorization(
  deps: DecisionDeps,
  request: AuthorizationRequest,
  user: AuthenticatedUser | null,
  browserIp: string,
): Promise<AuthorizeOutcome> {
  const silent = request.prompt.has('none');
  if (!user) {
    if (silent) return errorRedirect(deps, request, 'login_required', 'nobody is signed in');
    return { kind: 'sign_in', returnTo: `${AUTHORIZE_PATH}?${authorizeQueryString(request.parameters)}`, again: false };
  }
  const signedInSeconds = Math.floor((deps.clock.now().getTime() - user.authTime.getTime()) / 1000);
  const tooOld = request.maxAge !== null && signedInSeconds > request.maxAge;
  if (request.prompt.has('login') || tooOld) {
    if (silent) return errorRedirect(deps, request, 'login_required', 'the user signed in longer ago than max_age allows');
    // Back without prompt=login (any other prompt value stays): the sign-in it asks for is the one about to happen.
    const prompt = [...request.prompt].filter((value) => value !== 'login').join(' ');
    const parameters = { ...request.parameters, prompt: prompt === '' ? undefined : prompt };
    return { kind: 'sign_in', returnTo: `${AUTHORIZE_PATH}?${authorizeQueryString(parameters)}`, again: true };
  }
  const consent = await findConsent(deps.db, user.userId, request.client.clientId);
  const shared = consent?.scopes ?? [];
  const agreed = consent !== undefined && request.scopes.every((scope) => shared.includes(scope));
  if (agreed && !request.prompt.has('consent')) return issueCode(deps, request, user, browserIp);
  if (silent) return errorRedirect(deps, request, 'consent_required', 'the user has not agreed to share these scopes with this app');
  return { kind: 'consent', shared };
}

/** The user agreed on the consent page: remembered for this app and these scopes, and a code goes back. */
export async function approveAuthorization(
  deps: DecisionDeps,
  request: AuthorizationRequest,
  user: AuthenticatedUser,
  browserIp: string,
): Promise<AuthorizeOutcome> {
  await rememberConsent(deps.db, user.userId, request.client.clientId, request.scopes, deps.clock.now());
  return issueCode(deps, request, user, browserIp);
}

/**
 * OAuth 2.1 §4.1.2: an opaque code of 256 random bits, stored as its SHA-256 hash, bound to the
 * app, the redirect URI and the PKCE challenge, for AUTHORIZATION_CODE_TTL_SECONDS.
 */
async function issueCode(deps: DecisionDeps, request: AuthorizationRequest, user: AuthenticatedUser, browserIp: string): Promise<AuthorizeOutcome> {
  const now = deps.clock.now();
  const code = mintOpaque(TOKEN_PREFIX.authorizationCode);
  await insertAuthorizationCode(deps.db, {
    code_hash: code.hash,
    client_id: request.client.clientId,
    user_id: user.userId,
    redirect_uri: request.redirectUri,
    scopes: request.scopes,
    code_challenge: request.codeChallenge,
    nonce: request.nonce,
    dpop_jkt: request.dpopJkt,
    auth_time: user.authTime,
    // Located, hence canonical and bounded: what a proxy forwarded never reaches the table as it came.
    signed_in_ip: deps.geo.locate(browserIp).address.slice(0, 64),
    created_at: now,
    expires_at: addSeconds(now, AUTHORIZATION_CODE_TTL_SECONDS),
  });
  deps.metrics.authorizationResponses.inc({ outcome: 'code' });
  return { kind: 'redirect', location: redirectWith(request.redirectUri, { code: code.value, state: request.state, iss: deps.config.issuer }) };
}
