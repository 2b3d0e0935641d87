import type { FastifyReply, FastifyRequest } from 'fastify';
import type { z } from 'zod';
import type { Deps } from '../deps.js';
import { isDatabaseUnavailable } from '../db/unavailable.js';
import { authenticateClient, identifyClient, type Client } from '../oauth/client-auth.js';
import { checkDpopProof, deferredSpend, dpopNonceHeader } from '../oauth/dpop.js';
import { OAuthError } from '../oauth/errors.js';
import type { RequestLimitName, SharedLimitName } from '../rate-limits/limiter.js';
import { parseForm } from './form.js';
import { clientCredentials } from './oauth-routes/request-client-credentials.js';
import { sendOAuthError } from './plugins/error-handler.js';
import { consumeAppBudget, consumeOAuthLimit, limitedAddress } from './rate-limit.js';

/**
 * A protocol endpoint's defences, in the order that makes them defences (the idea of
 * node-oidc-provider's lib/actions/token.js, without its shared context bag): each endpoint
 * declares its steps once, and a new endpoint composes the same steps rather than copying them.
 *
 * The order every endpoint keeps:
 *   1. the per-address limit, before the body is even parsed: a flood from one address (an IPv6
 *      /64) is refused cheaply and never reaches the budget an app's devices share;
 *   2. the form, parsed (every problem is invalid_request);
 *   3. the client, identified or authenticated;
 *   4. whatever refuses the request for what it is (grant type, scopes, platform fields);
 *   5. the app's shared budget, only now, so that a request refused anyway never uses it;
 *   then the work: the DPoP proof, the handler, the outcome's metric, and the reply with
 *   Cache-Control: no-store and, at an endpoint that takes DPoP proofs, the current DPoP nonce.
 */

/**
 * One named step. It refuses by throwing an OAuthError, or finds something (a client, a grant
 * type, a proof, the response) that `keep` records on the exchange. `run` returns a promise only
 * when it has to wait, and the runner awaits only then: a step answered synchronously (a limit
 * counted in memory, a request without a DPoP header) costs the request no await, and a step that
 * waits costs the one await of what it waits for, with no promise or closure of its own.
 */
export interface Step<X> {
  readonly run: (deps: Deps, exchange: X) => unknown;
  readonly keep?: (deps: Deps, exchange: X, found: never) => void;
}

/** A step that only refuses (a limit, a check). */
export function guard<X>(run: (deps: Deps, exchange: X) => void | Promise<void>): Step<X> {
  return { run };
}

/** A step that finds something the later steps need, and records it on the exchange with `keep`. */
export function finding<X, T>(run: (deps: Deps, exchange: X) => T | Promise<T>, keep: (deps: Deps, exchange: X, found: T) => void): Step<X> {
  return { run, keep };
}

/** What every protocol endpoint's exchange holds: the request, its form and its client once known. */
export interface ProtocolExchange<F extends ClientFields = ClientFields> {
  readonly request: FastifyRequest;
  form: F;
  client: Client;
}

interface ClientFields {
  client_id?: string | undefined;
  client_secret?: string | undefined;
}

export interface ProtocolEndpoint<X extends ProtocolExchange> {
  /** Steps 1-5, in order. A refusal here goes to the error handler and is counted nowhere. */
  readonly defences: readonly Step<X>[];
  /** The work, in order: an OAuth error here is the endpoint's answer, counted by `countOutcome`. */
  readonly work: readonly Step<X>[];
  /**
   * Counts the work's outcome (a metric): 'issued', the OAuth error code answered, or how the
   * error handler will name an unexpected failure.
   */
  readonly countOutcome?: (deps: Deps, exchange: X, outcome: string) => void;
  /** The body of the answer once the work is done. */
  readonly response: (exchange: X) => unknown;
  /**
   * Whether the endpoint takes DPoP proofs (RFC 9449): its answers then carry the current nonce
   * when nonces are on (§8.2). An endpoint that takes none (introspection) has no use for one.
   */
  readonly takesDpopProofs: boolean;
}

/**
 * Runs an endpoint's steps for one request and answers it. The route returns this promise as its
 * own: no await more than the steps themselves need.
 */
export async function serveProtocolRequest<X extends ProtocolExchange>(
  deps: Deps,
  endpoint: ProtocolEndpoint<X>,
  exchange: X,
  reply: FastifyReply,
): Promise<FastifyReply> {
  for (const step of endpoint.defences) {
    let found = step.run(deps, exchange);
    // Awaited before keep is looked at: a guard's promise (a limit) must be waited for too.
    if (found instanceof Promise) found = await found;
    if (step.keep) step.keep(deps, exchange, found as never);
  }
  try {
    for (const step of endpoint.work) {
      let found = step.run(deps, exchange);
      if (found instanceof Promise) found = await found;
      if (step.keep) step.keep(deps, exchange, found as never);
    }
  } catch (error) {
    if (error instanceof OAuthError) {
      endpoint.countOutcome?.(deps, exchange, error.error);
      // Most polls end here (authorization_pending): answered directly, as the error handler
      // would, without a rejected promise's trip through fastify's error path.
      return sendOAuthError(reply, error);
    }
    // Named as the error handler will answer it.
    endpoint.countOutcome?.(deps, exchange, isDatabaseUnavailable(error) ? 'temporarily_unavailable' : 'server_error');
    throw error;
  }
  endpoint.countOutcome?.(deps, exchange, 'issued');
  return answerNoStore(deps, reply, endpoint.response(exchange), endpoint.takesDpopProofs);
}

/** Step 1: counts the request against a per-address limit, before anything else is read. */
export function limitPerAddress(name: RequestLimitName): Step<ProtocolExchange> {
  return guard(function limitPerAddress(deps, exchange) {
    return consumeOAuthLimit(deps, name, limitedAddress(deps, exchange.request));
  });
}

/** Step 2: the endpoint's form, parsed with zod (every problem is invalid_request, RFC 6749 §3.1). */
export function readForm<S extends z.ZodType<ClientFields>>(schema: S): Step<ProtocolExchange<z.output<S>>> {
  return finding(
    function readForm(_deps, exchange: ProtocolExchange<z.output<S>>) {
      return parseForm(schema, exchange.request.body);
    },
    (_deps, exchange, form) => {
      exchange.form = form;
    },
  );
}

/**
 * Step 3: the client, identified by what the request offers (RFC 6749 §2.3). A disabled app is
 * refused by the statement that does the work, not by a round trip here.
 */
export const identifyRequestClient = finding(
  function identifyRequestClient(deps, exchange: ProtocolExchange) {
    return identifyClient(deps.clients, clientCredentials(exchange.request, exchange.form));
  },
  (_deps, exchange, client) => {
    exchange.client = client;
  },
);

/**
 * Step 3, where a request changes something for the app (revocation): the client authenticated
 * against its current registration, a disabled app refused here.
 */
export const authenticateRequestClient = finding(
  function authenticateRequestClient(deps, exchange: ProtocolExchange) {
    return authenticateClient(deps.clients, clientCredentials(exchange.request, exchange.form));
  },
  (_deps, exchange, client) => {
    exchange.client = client;
  },
);

/** Step 5: counts the request against the app's budget, which its devices share (see consumeAppBudget). */
export function spendAppBudget(name: SharedLimitName): Step<ProtocolExchange> {
  return guard(function spendAppBudget(deps, exchange) {
    return consumeAppBudget(deps, name, exchange.client.clientId, exchange.request);
  });
}

/**
 * The work's last step: the endpoint's one domain call, whose result is the body of the answer,
 * kept as `exchange.response`.
 */
export function answeredBy<X extends ProtocolExchange & { response: unknown }>(
  run: (deps: Deps, exchange: X) => X['response'] | Promise<X['response']>,
): Step<X> {
  return finding(run, keepResponse);
}

function keepResponse(_deps: Deps, exchange: { response: unknown }, response: unknown): void {
  exchange.response = response;
}

/** What an endpoint that takes DPoP proofs keeps of one (RFC 9449). */
export interface DpopExchange extends ProtocolExchange {
  /** The endpoint's URL as this server names it, which the proof's htu must name. */
  readonly url: string;
  /** The key of the request's checked proof, or null without one. */
  dpopJkt: string | null;
  /** Records the proof as used, once, when the request found what needed it; nothing without a proof. */
  spendProof: () => Promise<void>;
}

/**
 * The work's first step at an endpoint that takes DPoP proofs (RFC 9449 §4.3): checked only when
 * a proof came, so a request without one goes on without awaiting anything (issue 30 §1). The
 * proof is checked here, signature included; it is recorded as used only by `spendProof`, once
 * the request found what needed it (issue 28 §2): a grant's credential, a bound token to revoke.
 */
export const checkDpopProofIfSent = finding(
  function checkDpopProofIfSent(deps, exchange: DpopExchange) {
    const header = exchange.request.headers.dpop;
    return header === undefined ? null : checkDpopProof(deps, { header, method: 'POST', url: exchange.url }, 'token_endpoint');
  },
  (deps, exchange, proof) => {
    if (!proof) return;
    exchange.dpopJkt = proof.jkt;
    exchange.spendProof = deferredSpend(deps, proof, 'token_endpoint');
  },
);

/** RFC 6749 §5.1: token responses must not be cached; RFC 9449 §8.2: every answer of a DPoP endpoint carries the current nonce. */
function answerNoStore(deps: Deps, reply: FastifyReply, body: unknown, takesDpopProofs: boolean): FastifyReply {
  reply.header('Cache-Control', 'no-store').header('Pragma', 'no-cache');
  if (takesDpopProofs) reply.headers(dpopNonceHeader(deps));
  return reply.send(body);
}
