import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { Deps } from '../../deps.js';
import { identifyClient } from '../../oauth/client-auth.js';
import { checkDeviceAuthorization, requestDeviceAuthorization } from '../../oauth/device/authorization.js';
import { dpopNonceHeader, verifyDpopProof } from '../../oauth/dpop.js';
import { endpoints } from '../../oauth/metadata.js';
import { parseScope } from '../../oauth/scopes.js';
import { parseForm } from '../form.js';
import { consumeAppBudget, consumeOAuthLimit, limitedAddress } from '../rate-limit.js';
import { clientCredentials } from './client-credentials.js';

const deviceCodeForm = z.object({
  client_id: z.string().optional(),
  client_secret: z.string().optional(),
  scope: z.string().optional(),
  platform_name: z.string().optional(),
  platform_description: z.string().optional(),
  platform_icon: z.string().optional(),
});

export function deviceAuthorizationRoutes(app: FastifyInstance, deps: Deps): void {
  const url = endpoints(deps.config.issuer).device_authorization_endpoint;
  // RFC 8628 §3.1 / §3.2
  app.post('/oauth/device/code', async (request, reply) => {
    // Before any other work: floods from one address (an IPv6 /64) are refused cheaply, and never
    // reach the budget an app's devices share.
    const perAddress = consumeOAuthLimit(deps, 'deviceCodePerIp', limitedAddress(deps, request));
    if (perAddress) await perAddress;
    const form = parseForm(deviceCodeForm, request.body);
    // The insert itself refuses a disabled app (one round trip for the whole request).
    const client = await identifyClient(deps.clients, clientCredentials(request, form));
    const input = {
      scope: parseScope(form.scope),
      platform_name: form.platform_name,
      platform_description: form.platform_description,
      platform_icon: form.platform_icon,
    };
    // A request refused for what it is (grant type, scope, platform fields) never uses the app's budget.
    checkDeviceAuthorization(client, input);
    const perApp = consumeAppBudget(deps, 'deviceCodePerClient', client.clientId, request);
    if (perApp) await perApp;
    // A proof here binds the request to its key (draft-parecki-oauth-dpop-device-flow).
    const proof = await verifyDpopProof(deps, { header: request.headers.dpop, method: 'POST', url }, 'token_endpoint');
    const response = await requestDeviceAuthorization(deps, client, { ...input, dpopJkt: proof?.jkt ?? null }, {
      ip: request.ip,
      userAgent: request.headers['user-agent'],
    });
    return reply.header('Cache-Control', 'no-store').header('Pragma', 'no-cache').headers(dpopNonceHeader(deps)).send(response);
  });
}
