import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { Deps } from '../../deps.js';
import { requireGrantType, type Client } from '../../oauth/client-auth.js';
import { unsupportedGrantType } from '../../oauth/errors.js';
import { keyNotProven, NOTHING_TO_SPEND } from '../../oauth/dpop.js';
import { grantTypes } from '../../oauth/grant-types/index.js';
import type { GrantContext, GrantType } from '../../oauth/grant-types/types.js';
import { endpoints } from '../../oauth/metadata.js';
import type { TokenResponse } from '../../oauth/token-response.js';
import type { DevicePolicies } from '../../oauth/device/policies.js';
import type { DevicePolicy } from '../../oauth/device/policy.js';
import { parseForm } from '../form.js';
import {
  answeredBy,
  checkDpopProofIfSent,
  finding,
  guard,
  identifyRequestClient,
  limitPerAddress,
  readForm,
  serveProtocolRequest,
  spendAppBudget,
  type DpopExchange,
  type ProtocolEndpoint,
} from '../protocol-pipeline.js';

const tokenForm = z.object({
  grant_type: z.string().min(1),
  client_id: z.string().optional(),
  client_secret: z.string().optional(),
});

/**
 * One token request as its steps learn it. It is also the grant's context (GrantContext): the one
 * object a request allocates for its steps and its grant.
 */
class TokenExchange implements DpopExchange, GrantContext {
  form!: z.output<typeof tokenForm>;
  client!: Client;
  grantType!: GrantType;
  parameters: unknown;
  readonly ip: string;
  dpopJkt: string | null = null;
  spendProof: () => Promise<void> = NOTHING_TO_SPEND;
  response: TokenResponse | null = null;
  #devicePolicy: DevicePolicy | undefined;

  constructor(
    readonly request: FastifyRequest,
    readonly url: string,
    private readonly devicePolicies: DevicePolicies,
  ) {
    this.ip = request.ip;
  }

  /** The operator's device policy for the app (issue 31 §2), resolved when a grant first asks: only the device_code grant does. */
  get devicePolicy(): DevicePolicy {
    this.#devicePolicy ??= this.devicePolicies.resolve(this.client.clientId);
    return this.#devicePolicy;
  }
}

/** Step 4: RFC 6749 §5.2: a grant type this server does not know is unsupported_grant_type. */
const findGrantType = finding(
  function findGrantType(_deps, exchange: TokenExchange) {
    const grantType = grantTypes.get(exchange.form.grant_type);
    if (!grantType) throw unsupportedGrantType(`grant_type ${exchange.form.grant_type} is not supported`);
    return grantType;
  },
  (_deps, exchange, grantType) => {
    exchange.grantType = grantType;
  },
);

/** Step 4: an app not registered for the grant type is unauthorized_client. */
const requireRegisteredGrantType = guard(function requireRegisteredGrantType(_deps, exchange: TokenExchange) {
  requireGrantType(exchange.client, exchange.grantType.grantType);
});

/** Step 4: the grant type's own parameters, parsed as the form was. */
const readGrantParameters = finding(
  function readGrantParameters(_deps, exchange: TokenExchange) {
    return parseForm(exchange.grantType.parameters, exchange.request.body) as unknown;
  },
  (_deps, exchange, parameters) => {
    exchange.parameters = parameters;
  },
);

/** An app registered to use DPoP sends a proof with every token request. */
const requireDpopWhenRegistered = guard(function requireDpopWhenRegistered(_deps, exchange: TokenExchange) {
  if (exchange.dpopJkt === null && exchange.client.requireDpop) {
    throw keyNotProven('token_endpoint', 'this app is registered to use DPoP: send a DPoP proof');
  }
});

/** The grant type's handler; the grant types refuse a disabled app in the statement that does their work. */
const handleGrant = answeredBy(function handleGrant(deps, exchange: TokenExchange) {
  return exchange.grantType.handle(deps, exchange.client, exchange.parameters, exchange);
});

// RFC 6749 §3.2
const tokenEndpoint: ProtocolEndpoint<TokenExchange> = {
  defences: [
    limitPerAddress('tokenPerIp'),
    readForm(tokenForm),
    identifyRequestClient,
    findGrantType,
    requireRegisteredGrantType,
    readGrantParameters,
    spendAppBudget('tokenPerClient'),
  ],
  // RFC 9449 §5: a Bearer request goes straight to its grant; the grant spends a proof once it found its credential.
  work: [checkDpopProofIfSent, requireDpopWhenRegistered, handleGrant],
  countOutcome: (deps, exchange, outcome) => deps.metrics.tokenRequests.inc({ grant_type: exchange.grantType.grantType, outcome }),
  response: (exchange) => exchange.response,
  takesDpopProofs: true,
};

export function tokenRoutes(app: FastifyInstance, deps: Deps): void {
  const url = endpoints(deps.config.issuer).token_endpoint;
  app.post('/oauth/token', (request, reply) => serveProtocolRequest(deps, tokenEndpoint, new TokenExchange(request, url, deps.devicePolicies), reply));
}
