import type { FastifyInstance } from 'fastify';
import { invalidRequest } from '../../oauth/errors.js';
import { sendOAuthError } from './error-handler.js';

/** Parameters that carry a secret. In a URL they would end up in logs, histories and Referer headers. */
const SECRET_PARAMETERS = new Set(['access_token', 'refresh_token', 'token', 'device_code', 'client_secret', 'id_token', 'password']);

/**
 * RFC 6750 §2.3 and RFC 9700 §4.3.2: a token or secret in the query string of an OAuth request is
 * refused outright, even where the same value in the body or header would be accepted.
 */
export function registerSecretsNotInUrl(app: FastifyInstance): void {
  // Synchronous: it runs on every request, and an async hook costs a promise each time.
  app.addHook('onRequest', (request, reply, done) => {
    const query = request.url.indexOf('?');
    if (query < 0 || !request.url.startsWith('/oauth/')) return done();
    for (const name of new URLSearchParams(request.url.slice(query + 1)).keys()) {
      if (SECRET_PARAMETERS.has(name)) {
        // Answered here: done() is not called, so the request goes no further.
        sendOAuthError(reply, invalidRequest(`${name} must never be sent in the URL; send it in the request body or the Authorization header`));
        return;
      }
    }
    done();
  });
}
