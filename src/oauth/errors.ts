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
  | 'server_error';

export class OAuthError extends Error {
  constructor(
    readonly error: OAuthErrorCode,
    readonly description: string,
    readonly status: number = 400,
    readonly headers: Readonly<Record<string, string>> = {},
  ) {
    super(`${error}: ${description}`);
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

export const temporarilyUnavailable = (description: string) =>
  new OAuthError('temporarily_unavailable', description, 503, { 'Retry-After': '5' });

/** RFC 6585 §4: 429 with Retry-After; the OAuth error code says "try again later". */
export const tooManyRequests = (description: string, retryAfterSeconds: number) =>
  new OAuthError('temporarily_unavailable', description, 429, { 'Retry-After': String(retryAfterSeconds) });

/** A page that re-renders a form with a message for the user. */
export class PageError extends Error {
  constructor(
    readonly status: number,
    readonly title: string,
    message: string,
    readonly headers: Readonly<Record<string, string>> = {},
  ) {
    super(message);
    this.name = 'PageError';
  }
}
