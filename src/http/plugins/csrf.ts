import type { FastifyInstance } from 'fastify';
import { isValidCsrfToken } from '../../accounts/sessions.js';
import { PageError } from '../../oauth/errors.js';

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * Every state-changing page request must carry its browser's CSRF token in the csrf_token
 * field: a session's stored secret, or for an anonymous visitor the HMAC of its cookie's nonce.
 * Checked here, once, before any route runs: a route cannot forget it.
 * Registered after registerSessions, which loads request.session.
 */
export function registerCsrfCheck(app: FastifyInstance): void {
  app.addHook('preHandler', async (request) => {
    if (SAFE_METHODS.has(request.method)) return;
    const body = request.body && typeof request.body === 'object' ? (request.body as Record<string, unknown>) : {};
    const submitted = body.csrf_token;
    const session = request.session;
    if (typeof submitted !== 'string' || !session || !isValidCsrfToken(session, submitted)) {
      throw new PageError(403, 'error.form_expired', 'error.form_expired_message');
    }
  });
}
