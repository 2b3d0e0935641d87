import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { z } from 'zod';
import type { Deps } from '../../deps.js';
import type { Client } from '../../oauth/client-auth.js';
import { introspectToken, requireResourceServer, type IntrospectionResponse } from '../../oauth/introspection.js';
import {
  answeredBy,
  guard,
  identifyRequestClient,
  limitPerAddress,
  readForm,
  serveProtocolRequest,
  spendAppBudget,
  type ProtocolEndpoint,
  type ProtocolExchange,
} from '../protocol-pipeline.js';
import { tokenRequestForm } from './request-client-credentials.js';

/** One introspection request as its steps learn it. */
class IntrospectionExchange implements ProtocolExchange<z.output<typeof tokenRequestForm>> {
  form!: z.output<typeof tokenRequestForm>;
  client!: Client;
  response: IntrospectionResponse | null = null;

  constructor(readonly request: FastifyRequest) {}
}

/** Step 4: only a resource server may ask (RFC 7662 §2.1, §4); refused before the app's budget is charged. */
const requireResourceServerClient = guard(function requireResourceServerClient(_deps, exchange: IntrospectionExchange) {
  requireResourceServer(exchange.client);
});

/** The token's state; the statement that reads it also checks that the caller's app is enabled. */
const introspect = answeredBy(function introspect(deps, exchange: IntrospectionExchange) {
  return introspectToken(deps, exchange.client, exchange.form.token);
});

// RFC 7662 §2
const introspectionEndpoint: ProtocolEndpoint<IntrospectionExchange> = {
  defences: [
    limitPerAddress('introspectPerIp'),
    readForm(tokenRequestForm),
    identifyRequestClient,
    requireResourceServerClient,
    spendAppBudget('introspectPerClient'),
  ],
  work: [introspect],
  countOutcome: (deps, exchange, outcome) =>
    deps.metrics.introspectionRequests.inc({ outcome: outcome === 'issued' ? (exchange.response?.active ? 'active' : 'inactive') : outcome }),
  response: (exchange) => exchange.response,
  // A resource server sends no DPoP proof here: it authenticates as an app (RFC 7662 §2.1).
  takesDpopProofs: false,
};

export function introspectRoutes(app: FastifyInstance, deps: Deps): void {
  app.post('/oauth/introspect', (request, reply) => serveProtocolRequest(deps, introspectionEndpoint, new IntrospectionExchange(request), reply));
}
