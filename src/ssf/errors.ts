import { dpopChallenge } from '../oauth/dpop.js';
import type { Scheme } from '../oauth/token-presentation.js';

/**
 * The one error type of the Shared Signals endpoints (issue 32 §3): the management API (SSF 1.0
 * §8) and the poll endpoint (RFC 8936). SSF signals errors by HTTP status alone; the body is the
 * same shape as the OAuth endpoints' ({error, error_description}), and a token refused carries
 * the WWW-Authenticate challenge of the scheme it came with (RFC 6750 §3, RFC 9449 §7.1), as the
 * CAEP interoperability profile asks of a transmitter that is a resource server.
 */
export type SsfErrorCode = 'invalid_request' | 'invalid_token' | 'insufficient_scope' | 'not_found' | 'conflict' | 'too_many_requests';

export class SsfError extends Error {
  constructor(
    readonly error: SsfErrorCode,
    readonly description: string,
    readonly status: number,
    readonly headers: Readonly<Record<string, string>> = {},
  ) {
    super(`${error}: ${description}`);
    this.name = 'SsfError';
  }

  toBody(): { error: SsfErrorCode; error_description: string } {
    return { error: this.error, error_description: this.description };
  }
}

/** The challenge of the scheme a token came with (RFC 6750 §3, RFC 9449 §7.1). */
const challenge = (scheme: Scheme, fields: string) => ({
  'WWW-Authenticate': scheme === 'bearer' ? `Bearer realm="device-auth"${fields}` : `${dpopChallenge(null)}${fields}`,
});
const quoted = (text: string) => text.replace(/["\\]/g, '');

export const badRequest = (description: string) => new SsfError('invalid_request', description, 400);

/** RFC 6750 §3.1: no error code when the request carried no token at all; RFC 9449 §7.1: both schemes offered. */
export const tokenMissing = () =>
  new SsfError('invalid_request', 'an access token is required: Authorization: Bearer <token> (or DPoP <token> with a proof)', 401, {
    'WWW-Authenticate': `Bearer realm="device-auth", ${dpopChallenge(null)}`,
  });

export const tokenRefused = (scheme: Scheme, description: string) =>
  new SsfError('invalid_token', description, 401, challenge(scheme, `, error="invalid_token", error_description="${quoted(description)}"`));

export const scopeMissing = (scheme: Scheme, scope: string) =>
  new SsfError(
    'insufficient_scope',
    `the access token was not granted the ${scope} scope`,
    403,
    challenge(scheme, `, error="insufficient_scope", scope="${scope}"`),
  );

/** SSF 1.0 §8.1.1: a stream of another app is not found, as an unknown one is. */
export const noSuchStream = () => new SsfError('not_found', 'no stream with this stream_id for this receiver', 404);

export const conflict = (description: string) => new SsfError('conflict', description, 409);

export const tooManyRequests = (description: string, retryAfterSeconds: number) =>
  new SsfError('too_many_requests', description, 429, { 'Retry-After': String(retryAfterSeconds) });
