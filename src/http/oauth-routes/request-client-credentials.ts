import type { FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { ClientCredentials } from '../../oauth/client-auth.js';

/**
 * What a request offers to identify its client: the Basic header, the form's client_id and
 * client_secret, and whether it tried a client assertion (a method this server does not support;
 * those fields are not in the endpoints' forms, so they are looked for in the raw body).
 */
export function clientCredentials(request: FastifyRequest, form: { client_id?: string | undefined; client_secret?: string | undefined }): ClientCredentials {
  const body = request.body && typeof request.body === 'object' ? (request.body as Record<string, unknown>) : {};
  return {
    authorization: request.headers.authorization,
    clientId: form.client_id,
    clientSecret: form.client_secret,
    assertion: body.client_assertion !== undefined || body.client_assertion_type !== undefined,
  };
}

/**
 * The form of revocation (RFC 7009 §2.1) and introspection (RFC 7662 §2.1): token is REQUIRED.
 * Its length is not limited here: an overlong token is an invalid token, not an invalid request.
 * token_type_hint is accepted and not needed, since tokens are found by hash in every table.
 */
export const tokenRequestForm = z.object({
  token: z.string().min(1),
  token_type_hint: z.string().optional(),
  client_id: z.string().optional(),
  client_secret: z.string().optional(),
});
