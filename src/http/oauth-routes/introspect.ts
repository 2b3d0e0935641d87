import type { FastifyInstance } from 'fastify';
import type { Deps } from '../../deps.js';
import { identifyClient } from '../../oauth/client-auth.js';
import { introspectToken } from '../../oauth/introspection.js';
import { parseForm } from '../form.js';
import { consumeOAuthLimit, limitedAddress } from '../rate-limit.js';
import { clientCredentials, tokenRequestForm } from './client-credentials.js';

export function introspectRoutes(app: FastifyInstance, deps: Deps): void {
  // RFC 7662 §2
  app.post('/oauth/introspect', async (request, reply) => {
    // Before any other work, as at the token endpoint: a flood from one address is refused cheaply.
    const perAddress = consumeOAuthLimit(deps, 'introspectPerIp', limitedAddress(deps, request));
    if (perAddress) await perAddress;
    const form = parseForm(tokenRequestForm, request.body);
    // The introspection statement itself checks that the caller's app is enabled.
    const client = await identifyClient(deps.clients, clientCredentials(request, form));
    const response = await introspectToken(deps, client, form.token);
    return reply.header('Cache-Control', 'no-store').header('Pragma', 'no-cache').send(response);
  });
}
