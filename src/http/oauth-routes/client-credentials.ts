import type { FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { ClientCredentials } from '../../oauth/client-auth.js';

/**
 * What a request offers to identify its client: the Basic header, the form's client_id and, where
 * the endpoint accepts client_secret_post (the token endpoint only), the form's client_secret.
 */
export function clientCredentials(
  request: FastifyRequest,
  form: { client_id?: string | undefined; client_secret?: string | undefined },
  { secretInBody = false }: { secretInBody?: boolean } = {},
): ClientCredentials {
  return { authorization: request.headers.authorization, clientId: form.client_id, clientSecret: form.client_secret, secretInBody };
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
