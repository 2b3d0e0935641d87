import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { describeUnavailable, isDatabaseUnavailable } from '../../db/unavailable.js';
import { RedisUnavailableError } from '../../db/redis.js';
import { OAuthError, PageError, RETRY_AFTER_SECONDS, temporarilyUnavailable } from '../../oauth/errors.js';
import type { MessageKey, MessageValues } from '../../i18n/catalogues.js';
import { SsfError } from '../../ssf/errors.js';
import { languageModel } from '../page-language.js';

/**
 * JSON errors for the protocol's endpoints and the Shared Signals ones; the authorization
 * endpoint is a page a person sees.
 */
const isOAuthPath = (url: string) =>
  (url.startsWith('/oauth/') && !url.startsWith('/oauth/authorize')) || url.startsWith('/.well-known/') || url.startsWith('/ssf/');

/** The one shape of both JSON surfaces' errors: {error, error_description}, with the error's headers. */
export function sendOAuthError(reply: FastifyReply, error: OAuthError | SsfError): FastifyReply {
  return reply
    .code(error.status)
    .headers({ 'Cache-Control': 'no-store', Pragma: 'no-cache', ...error.headers })
    .send(error.toBody());
}

/** An error page in the reader's language; `values` fill the message's arguments. */
function sendPageError(
  request: FastifyRequest,
  reply: FastifyReply,
  status: number,
  title: MessageKey,
  message: MessageKey,
  values: MessageValues = {},
): FastifyReply {
  const language = languageModel(request, reply);
  return reply
    .code(status)
    .header('Cache-Control', 'no-store')
    .view('error.eta', { ...language, title: language.t(title), message: language.t(message, values) });
}

/**
 * The one place errors become responses: OAuth endpoints answer {error, error_description},
 * pages answer a page. A database that cannot be reached is a 503 the client may retry; anything
 * else unexpected is logged and answered without detail.
 */
export function registerErrorHandler(app: FastifyInstance): void {
  app.setErrorHandler((error: FastifyError | OAuthError | SsfError | PageError, request: FastifyRequest, reply: FastifyReply) => {
    if (error instanceof OAuthError || error instanceof SsfError) return sendOAuthError(reply, error);
    if (error instanceof PageError) {
      return sendPageError(request, reply.headers(error.headers), error.status, error.title, error.messageKey, error.values);
    }

    const status = 'statusCode' in error && typeof error.statusCode === 'number' ? error.statusCode : 500;
    if (status >= 400 && status < 500) {
      // Framework-level refusals: unsupported media type, a body too large or malformed.
      const description = error.message || 'the request could not be read';
      if (isOAuthPath(request.url)) return sendOAuthError(reply, new OAuthError('invalid_request', description, status));
      return sendPageError(request, reply, status, 'error.bad_request', 'error.request_unreadable', { detail: description });
    }

    if (isDatabaseUnavailable(error)) {
      // Expected during an outage: one line per request, no stack. Whatever the request changed
      // was one transaction, so it either committed before the connection went or rolled back.
      request.log.warn(describeUnavailable(error), 'database unavailable');
      if (isOAuthPath(request.url)) {
        return sendOAuthError(reply, temporarilyUnavailable('the service cannot reach its database; retry shortly'));
      }
      reply.header('Retry-After', String(RETRY_AFTER_SECONDS));
      return sendPageError(request, reply, 503, 'error.unavailable', 'error.unavailable_message');
    }

    if (error instanceof RedisUnavailableError) {
      // Redis (REDIS_URL) is away: the call failed fast (no offline queue, a short timeout); the client may retry.
      request.log.warn({ reason: error.message }, 'rate-limit store unavailable');
      if (isOAuthPath(request.url)) {
        return sendOAuthError(reply, temporarilyUnavailable('the service cannot reach its rate-limit store; retry shortly'));
      }
      reply.header('Retry-After', String(RETRY_AFTER_SECONDS));
      return sendPageError(request, reply, 503, 'error.unavailable', 'error.unavailable_message');
    }

    request.log.error({ err: error }, 'unhandled error');
    if (isOAuthPath(request.url)) {
      return sendOAuthError(reply, new OAuthError('server_error', 'the server could not complete the request', 500));
    }
    return sendPageError(request, reply, 500, 'error.internal', 'error.internal_message');
  });

  app.setNotFoundHandler((request, reply) => {
    if (isOAuthPath(request.url)) {
      return sendOAuthError(reply, new OAuthError('invalid_request', `no endpoint ${request.method} ${request.url.split('?')[0]}`, 404));
    }
    return sendPageError(request, reply, 404, 'error.not_found', 'error.not_found_message');
  });
}
