import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { z } from 'zod';
import type { Deps } from '../../deps.js';
import type { Client } from '../../oauth/client-auth.js';
import { NOTHING_TO_SPEND } from '../../oauth/dpop.js';
import { endpoints } from '../../oauth/metadata.js';
import { revokeToken, type RevocationContext } from '../../oauth/token-revocation.js';
import {
  authenticateRequestClient,
  checkDpopProofIfSent,
  guard,
  limitPerAddress,
  readForm,
  serveProtocolRequest,
  spendAppBudget,
  type DpopExchange,
  type ProtocolEndpoint,
} from '../protocol-pipeline.js';
import { tokenRequestForm } from './request-client-credentials.js';

/** One revocation request as its steps learn it; also the revocation's context (the caller's address, its proof). */
class RevocationExchange implements DpopExchange, RevocationContext {
  form!: z.output<typeof tokenRequestForm>;
  client!: Client;
  dpopJkt: string | null = null;
  spendProof: () => Promise<void> = NOTHING_TO_SPEND;
  readonly ip: string;

  constructor(
    readonly request: FastifyRequest,
    readonly url: string,
  ) {
    this.ip = request.ip;
  }
}

/**
 * The grant of the token revoked, if it is the app's; a public app proves the key of a DPoP-bound
 * token, and its proof is spent only then.
 */
const revoke = guard(function revoke(deps, exchange: RevocationExchange) {
  return revokeToken(deps, exchange.client, exchange.form.token, exchange);
});

// RFC 7009 §2
const revocationEndpoint: ProtocolEndpoint<RevocationExchange> = {
  defences: [limitPerAddress('revokePerIp'), readForm(tokenRequestForm), authenticateRequestClient, spendAppBudget('revokePerClient')],
  work: [checkDpopProofIfSent, revoke],
  countOutcome: (deps, _exchange, outcome) => deps.metrics.revocationRequests.inc({ outcome: outcome === 'issued' ? 'answered' : outcome }),
  // RFC 7009 §2.2: 200 even for an invalid token, so the endpoint tells nothing about tokens.
  response: () => ({}),
  takesDpopProofs: true,
};

export function revokeRoutes(app: FastifyInstance, deps: Deps): void {
  const url = endpoints(deps.config.issuer).revocation_endpoint;
  app.post('/oauth/revoke', (request, reply) => serveProtocolRequest(deps, revocationEndpoint, new RevocationExchange(request, url), reply));
}
