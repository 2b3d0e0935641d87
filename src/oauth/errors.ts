import type { MessageKey, MessageValues } from '../i18n/catalogues.js';
/**
 * The one error type of the protocol: RFC 6749 §5.2 codes plus those of RFC 8628 §3.5,
 * RFC 7009 and RFC 6750. Descriptions are written for the client developer.
 */
export type OAuthErrorCode =
  | 'invalid_request'
  | 'invalid_client'
  | 'invalid_grant'
  | 'unauthorized_client'
  | 'unsupported_grant_type'
  | 'unsupported_token_type'
  | 'invalid_scope'
  | 'access_denied'
  | 'authorization_pending'
  | 'slow_down'
  | 'expired_token'
  | 'invalid_token'
  | 'insufficient_scope'
  | 'temporarily_unavailable'
  | 'server_error'
  // RFC 9449 §5 / §7.1 / §8
  | 'invalid_dpop_proof'
  | 'use_dpop_nonce';

export class OAuthError extends Error {
  constructor(
    readonly error: OAuthErrorCode,
    readonly description: string,
    readonly status: number = 400,
    readonly headers: Readonly<Record<string, string>> = {},
  ) {
    // An OAuth error is an answer, not a fault: nobody reads its stack, and capturing one for every
    // authorization_pending cost about 6% of a poll's CPU (npm run bench -- --profile).
    const stackTraceLimit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    super(`${error}: ${description}`);
    Error.stackTraceLimit = stackTraceLimit;
    this.name = 'OAuthError';
  }

  toBody(): { error: OAuthErrorCode; error_description: string } {
    return { error: this.error, error_description: this.description };
  }
}

export const invalidRequest = (description: string) => new OAuthError('invalid_request', description);
export const invalidGrant = (description: string) => new OAuthError('invalid_grant', description);
export const invalidScope = (description: string) => new OAuthError('invalid_scope', description);
export const unsupportedGrantType = (description: string) => new OAuthError('unsupported_grant_type', description);
export const unauthorizedClient = (description: string) => new OAuthError('unauthorized_client', description);
export const accessDenied = (description: string) => new OAuthError('access_denied', description);
export const authorizationPending = (description: string) => new OAuthError('authorization_pending', description);
export const slowDown = (description: string) => new OAuthError('slow_down', description);
export const expiredToken = (description: string) => new OAuthError('expired_token', description);

/** RFC 6749 §5.2: 401 with a WWW-Authenticate challenge when the client tried HTTP Basic or none. */
export const invalidClient = (description: string) =>
  new OAuthError('invalid_client', description, 401, { 'WWW-Authenticate': 'Basic realm="device-auth", charset="UTF-8"' });

/** RFC 6750 §3.1. */
export const invalidToken = (description: string) =>
  new OAuthError('invalid_token', description, 401, {
    'WWW-Authenticate': `Bearer realm="device-auth", error="invalid_token", error_description="${description.replace(/["\\]/g, '')}"`,
  });

/** Seconds a client is asked to wait before retrying a request the server could not serve. */
export const RETRY_AFTER_SECONDS = 5;

/**
 * RFC 6749 names temporarily_unavailable for the authorization endpoint (§4.1.2.1); RFC 7009
 * §2.2.1 answers 503 for a revocation to retry. Used on every OAuth endpoint while the database
 * is away.
 */
export const temporarilyUnavailable = (description: string) =>
  new OAuthError('temporarily_unavailable', description, 503, { 'Retry-After': String(RETRY_AFTER_SECONDS) });

/** RFC 6585 §4: 429 with Retry-After; the OAuth error code says "try again later". */
export const tooManyRequests = (description: string, retryAfterSeconds: number) =>
  new OAuthError('temporarily_unavailable', description, 429, { 'Retry-After': String(retryAfterSeconds) });

/** A page that re-renders a form with a message for the user. */
export class PageError extends Error {
  /** Title and message are catalogue keys: the page is written in the reader's language. */
  constructor(
    readonly status: number,
    readonly title: MessageKey,
    readonly messageKey: MessageKey,
    readonly values: MessageValues = {},
    readonly headers: Readonly<Record<string, string>> = {},
  ) {
    super(messageKey);
    this.name = 'PageError';
  }
}
