import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { Deps } from '../../deps.js';
import { isDatabaseUnavailable } from '../../db/unavailable.js';
import { identifyClient, requireGrantType } from '../../oauth/client-auth.js';
import { OAuthError, unsupportedGrantType } from '../../oauth/errors.js';
import { checkDpopProof, deferredSpend, dpopNonceHeader, keyNotProven } from '../../oauth/dpop.js';
import { grantTypes } from '../../oauth/grant-types/index.js';
import { endpoints } from '../../oauth/metadata.js';
import { parseForm } from '../form.js';
import { sendOAuthError } from '../plugins/error-handler.js';
import { consumeAppBudget, consumeOAuthLimit, limitedAddress } from '../rate-limit.js';
import { clientCredentials } from './client-credentials.js';

const tokenForm = z.object({
  grant_type: z.string().min(1),
  client_id: z.string().optional(),
  client_secret: z.string().optional(),
});

export function tokenRoutes(app: FastifyInstance, deps: Deps): void {
  const url = endpoints(deps.config.issuer).token_endpoint;
  // RFC 6749 §3.2
  app.post('/oauth/token', async (request, reply) => {
    // Per address first: what one address sends never reaches the budget an app's devices share.
    const perAddress = consumeOAuthLimit(deps, 'tokenPerIp', limitedAddress(deps, request));
    if (perAddress) await perAddress;
    const form = parseForm(tokenForm, request.body);
    // The grant types' handlers refuse a disabled app in the same statement that does their work.
    const client = await identifyClient(deps.clients, clientCredentials(request, form));
    const grantType = grantTypes.get(form.grant_type);
    if (!grantType) throw unsupportedGrantType(`grant_type ${form.grant_type} is not supported`);
    requireGrantType(client, grantType.grantType);
    const parameters = parseForm(grantType.parameters, request.body);
    // Only now: a request refused for what it is (form, app, grant type) never uses the app's budget.
    const perApp = consumeAppBudget(deps, 'tokenPerClient', client.clientId, request);
    if (perApp) await perApp;
    let response;
    try {
      // RFC 9449 §5: checked only when a proof came (or the app requires one): a Bearer request goes
      // straight to its grant, without awaiting anything (issue 30 §1). The proof is checked here,
      // signature included, and recorded as used by the grant once it found its credential (issue 28 §2).
      const proof = request.headers.dpop === undefined ? null : await checkDpopProof(deps, { header: request.headers.dpop, method: 'POST', url }, 'token_endpoint');
      if (!proof && client.requireDpop) throw keyNotProven('token_endpoint', 'this app is registered to use DPoP: send a DPoP proof');
      response = await grantType.handle(deps, client, parameters, {
        ip: request.ip,
        dpopJkt: proof?.jkt ?? null,
        spendProof: deferredSpend(deps, proof, 'token_endpoint'),
      });
    } catch (error) {
      if (error instanceof OAuthError) {
        deps.metrics.tokenRequests.inc({ grant_type: grantType.grantType, outcome: error.error });
        // Most polls end here (authorization_pending): answered directly, as the error handler
        // would, without a rejected promise's trip through fastify's error path.
        return sendOAuthError(reply, error);
      }
      // Named as the error handler will answer it.
      const outcome = isDatabaseUnavailable(error) ? 'temporarily_unavailable' : 'server_error';
      deps.metrics.tokenRequests.inc({ grant_type: grantType.grantType, outcome });
      throw error;
    }
    deps.metrics.tokenRequests.inc({ grant_type: grantType.grantType, outcome: 'issued' });
    // RFC 6749 §5.1: token responses must not be cached.
    return reply.header('Cache-Control', 'no-store').header('Pragma', 'no-cache').headers(dpopNonceHeader(deps)).send(response);
  });
}
