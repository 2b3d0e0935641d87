import { publicView, type Client, type ClientLookup } from '../client-auth.js';
import type { MessageKey } from '../../i18n/catalogues.js';
import { storedText } from '../../lib/stored-text.js';
import { AUTHORIZATION_CODE_GRANT } from '../metadata.js';
import { JKT_SYNTAX } from '../dpop.js';
import { S256_CHALLENGE } from '../pkce.js';
import { parseScope, userScopes } from '../scopes.js';

/** The authorization request's parameters as they arrived (query or form); anything else is ignored. */
export interface AuthorizeParameters {
  response_type?: string | undefined;
  client_id?: string | undefined;
  redirect_uri?: string | undefined;
  scope?: string | undefined;
  state?: string | undefined;
  code_challenge?: string | undefined;
  code_challenge_method?: string | undefined;
  nonce?: string | undefined;
  prompt?: string | undefined;
  max_age?: string | undefined;
  request?: string | undefined;
  request_uri?: string | undefined;
  dpop_jkt?: string | undefined;
}

/** The parameters an authorization request is made of, in the order they are written back. */
const AUTHORIZE_PARAMETER_NAMES = [
  'response_type',
  'client_id',
  'redirect_uri',
  'scope',
  'state',
  'code_challenge',
  'code_challenge_method',
  'nonce',
  'prompt',
  'max_age',
  'dpop_jkt',
] as const satisfies ReadonlyArray<keyof AuthorizeParameters>;

/** Bounds on what comes back in a redirect or an ID token: ample for any real client's values. */
export const MAX_STATE_LENGTH = 512;
const MAX_NONCE_LENGTH = 256;

export type Prompt = 'none' | 'login' | 'consent';

/** A valid request, ready for the user's session and consent. */
export interface AuthorizationRequest {
  client: Client;
  redirectUri: string;
  state: string | null;
  scopes: string[];
  codeChallenge: string;
  nonce: string | null;
  prompt: ReadonlySet<Prompt>;
  /** OIDC Core §3.1.2.1: the longest time since the user last signed in, in seconds. */
  maxAge: number | null;
  /** RFC 9449 §10: the code is redeemed only with a proof of this key. */
  dpopJkt: string | null;
  /** What the request was, to come back to after signing in (without prompt=login once honoured). */
  parameters: AuthorizeParameters;
}

/** RFC 6749 §4.1.2.1 (plus OIDC Core §3.1.2.6's codes): what may be sent back to a valid redirect URI. */
export type AuthorizeErrorCode =
  | 'invalid_request'
  | 'unauthorized_client'
  | 'access_denied'
  | 'unsupported_response_type'
  | 'invalid_scope'
  | 'server_error'
  | 'temporarily_unavailable'
  | 'login_required'
  | 'consent_required'
  | 'request_not_supported'
  | 'request_uri_not_supported';

export interface RedirectedError {
  kind: 'redirect_error';
  redirectUri: string;
  state: string | null;
  error: AuthorizeErrorCode;
  description: string;
}

/** Without a trustworthy redirect URI nothing is redirected: the user sees this on our page. */
export interface ShownError {
  kind: 'shown_error';
  messageKey: MessageKey;
}

export type CheckedRequest = { kind: 'valid'; request: AuthorizationRequest } | RedirectedError | ShownError;

const CLEAN_STATE = storedText.max(MAX_STATE_LENGTH);
const CLEAN_NONCE = storedText.max(MAX_NONCE_LENGTH);
const MAX_AGE = /^(0|[1-9][0-9]{0,8})$/;

/**
 * OAuth 2.1 §4.1.1 and OIDC Core §3.1.2.2. The app and its redirect URI are checked first, and a
 * problem with either is only shown: redirecting to an address the app did not register would
 * make this server an open redirector (RFC 9700 §4.11). The redirect URI must equal a registered
 * one exactly, character for character. Every later problem goes back to the app.
 */
export async function checkAuthorizationRequest(clients: ClientLookup, parameters: AuthorizeParameters): Promise<CheckedRequest> {
  // find() refuses a client_id that is not printable ASCII without a query.
  const found = parameters.client_id === undefined ? null : await clients.find(parameters.client_id);
  if (!found || found.disabled) return { kind: 'shown_error', messageKey: 'authorize.unknown_app' };
  const redirectUri = parameters.redirect_uri;
  if (redirectUri === undefined) return { kind: 'shown_error', messageKey: 'authorize.missing_redirect' };
  if (!found.redirectUris.includes(redirectUri)) return { kind: 'shown_error', messageKey: 'authorize.unregistered_redirect' };

  const cleanState = parameters.state === undefined ? null : CLEAN_STATE.safeParse(parameters.state);
  const state = cleanState?.success ? cleanState.data : null;
  const refuse = (error: AuthorizeErrorCode, description: string): RedirectedError => ({ kind: 'redirect_error', redirectUri, state, error, description });

  if (cleanState && !cleanState.success) return refuse('invalid_request', `state must be at most ${MAX_STATE_LENGTH} characters of text`);
  if (parameters.request !== undefined) return refuse('request_not_supported', 'request objects are not supported');
  if (parameters.request_uri !== undefined) return refuse('request_uri_not_supported', 'request_uri is not supported');
  if (parameters.response_type === undefined) return refuse('invalid_request', 'response_type is missing');
  if (parameters.response_type !== 'code') return refuse('unsupported_response_type', 'only response_type=code is supported');
  if (!found.grantTypes.includes(AUTHORIZATION_CODE_GRANT)) {
    return refuse('unauthorized_client', 'this app is not registered for the authorization_code grant');
  }
  if (parameters.code_challenge === undefined) return refuse('invalid_request', 'PKCE is required: send code_challenge with code_challenge_method=S256');
  if (parameters.code_challenge_method !== 'S256') return refuse('invalid_request', 'code_challenge_method must be S256');
  if (!S256_CHALLENGE.test(parameters.code_challenge)) return refuse('invalid_request', 'code_challenge must be 43 base64url characters (S256)');

  const requested = parseScope(parameters.scope) ?? [];
  // An app's allowed scopes are among those this server supports (its registration says so).
  // An app's own scopes (ssf.*) are never a user's to grant.
  const allowed = userScopes(found.allowedScopes);
  if (requested.some((scope) => !allowed.includes(scope))) return refuse('invalid_scope', 'a requested scope is not allowed for this app');
  const scopes = requested.length > 0 ? requested : allowed;

  let nonce: string | null = null;
  if (parameters.nonce !== undefined) {
    const clean = CLEAN_NONCE.safeParse(parameters.nonce);
    if (!clean.success) return refuse('invalid_request', `nonce must be at most ${MAX_NONCE_LENGTH} characters of text`);
    nonce = clean.data;
  }

  const prompt = new Set<Prompt>();
  for (const value of (parameters.prompt ?? '').split(' ').filter((v) => v.length > 0)) {
    // select_account asks to choose among accounts: a browser here holds one, so there is nothing to choose.
    if (value === 'select_account') continue;
    if (value !== 'none' && value !== 'login' && value !== 'consent') return refuse('invalid_request', 'prompt may be none, login, consent or select_account');
    prompt.add(value);
  }
  if (prompt.has('none') && prompt.size > 1) return refuse('invalid_request', 'prompt=none cannot be combined with other values');

  let maxAge: number | null = null;
  if (parameters.max_age !== undefined) {
    if (!MAX_AGE.test(parameters.max_age)) return refuse('invalid_request', 'max_age must be a number of seconds');
    maxAge = Number(parameters.max_age);
  }

  // RFC 9449 §10: a key thumbprint (RFC 7638, SHA-256) is 43 base64url characters, nothing else.
  if (parameters.dpop_jkt !== undefined && !JKT_SYNTAX.test(parameters.dpop_jkt)) {
    return refuse('invalid_request', 'dpop_jkt must be a base64url SHA-256 JWK thumbprint (43 characters)');
  }
  const dpopJkt = parameters.dpop_jkt ?? null;

  const client = publicView(found);
  return {
    kind: 'valid',
    request: { client, redirectUri, state, scopes, codeChallenge: parameters.code_challenge, nonce, prompt, maxAge, dpopJkt, parameters },
  };
}

/** The authorization request again as a query string, for coming back after sign-in. */
export function authorizeQueryString(parameters: AuthorizeParameters): string {
  const query = new URLSearchParams();
  for (const name of AUTHORIZE_PARAMETER_NAMES) {
    const value = parameters[name];
    if (value !== undefined) query.append(name, value);
  }
  return query.toString();
}

/** RFC 6749 §4.1.2 / §4.1.2.1 with RFC 9207's iss: the redirect URI with the answer added to its query. */
export function redirectWith(redirectUri: string, values: Record<string, string | null>): string {
  const url = new URL(redirectUri);
  for (const [name, value] of Object.entries(values)) {
    if (value !== null) url.searchParams.append(name, value);
  }
  return url.href;
}
