import type { FastifyRequest } from 'fastify';
import type { ClientCredentials } from '../../oauth/client-auth.js';

/** What a request offers to identify its client: the Basic header and the form's client_id. */
export function clientCredentials(request: FastifyRequest, form: { client_id?: string | undefined; client_secret?: string | undefined }): ClientCredentials {
  return { authorization: request.headers.authorization, clientId: form.client_id, clientSecret: form.client_secret };
}
