import type { FastifyInstance } from 'fastify';
import type { Deps } from '../../deps.js';
import { authenticateClient } from '../../oauth/client-auth.js';
import { checkDpopProof } from '../../oauth/dpop.js';
import { endpoints } from '../../oauth/metadata.js';
import { revokeToken } from '../../oauth/revocation.js';
import { parseForm } from '../form.js';
import { consumeOAuthLimit, limitedAddress } from '../rate-limit.js';
import { clientCredentials, tokenRequestForm } from './client-credentials.js';

export function revokeRoutes(app: FastifyInstance, deps: Deps): void {
  const url = endpoints(deps.config.issuer).revocation_endpoint;
  // RFC 7009 §2
  app.post('/oauth/revoke', async (request, reply) => {
    // Before any other work, as at the token endpoint: a flood from one address is refused cheaply.
    const perAddress = consumeOAuthLimit(deps, 'revokePerIp', limitedAddress(deps, request));
    if (perAddress) await perAddress;
    const form = parseForm(tokenRequestForm, request.body);
    const client = await authenticateClient(deps.clients, clientCredentials(request, form));
    // A public app proves the key of a DPoP-bound token it revokes; checked only when a proof came.
    const proof = await checkDpopProof(deps, { header: request.headers.dpop, method: 'POST', url }, 'token_endpoint');
    await revokeToken(deps, client, form.token, { ip: request.ip, proof });
    // RFC 7009 §2.2: 200 even for an invalid token, so the endpoint tells nothing about tokens.
    return reply.header('Cache-Control', 'no-store').header('Pragma', 'no-cache').send({});
  });
}
