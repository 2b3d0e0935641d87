import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { Deps } from '../../deps.js';
import type { Client } from '../../oauth/client-auth.js';
import {
  checkDeviceAuthorization,
  requestDeviceAuthorization,
  type CheckedDeviceAuthorization,
  type DeviceAuthorizationResponse,
  type StandardDeviceAuthorizationResponse,
} from '../../oauth/device/authorization.js';
import { NOTHING_TO_SPEND } from '../../oauth/dpop.js';
import { endpoints } from '../../oauth/metadata.js';
import { parseScope } from '../../oauth/scopes.js';
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

const deviceCodeForm = z.object({
  client_id: z.string().optional(),
  client_secret: z.string().optional(),
  scope: z.string().optional(),
  platform_name: z.string().optional(),
  platform_description: z.string().optional(),
  platform_icon: z.string().optional(),
});

/** One device authorization request as its steps learn it. */
class DeviceAuthorizationExchange implements DpopExchange {
  form!: z.output<typeof deviceCodeForm>;
  client!: Client;
  checked!: CheckedDeviceAuthorization;
  dpopJkt: string | null = null;
  spendProof: () => Promise<void> = NOTHING_TO_SPEND;
  response: DeviceAuthorizationResponse | StandardDeviceAuthorizationResponse | null = null;

  constructor(
    readonly request: FastifyRequest,
    readonly url: string,
  ) {}
}

/**
 * Step 4: whatever refuses the request for what it is (the app's grant types, its scopes, the
 * platform fields), checked once, without the database. The insert itself refuses a disabled app
 * (one round trip for the whole request).
 */
const checkRequest = finding(
  function checkRequest(deps, exchange: DeviceAuthorizationExchange) {
    const { form } = exchange;
    return checkDeviceAuthorization(
      exchange.client,
      {
        scope: parseScope(form.scope),
        platform_name: form.platform_name,
        platform_description: form.platform_description,
        platform_icon: form.platform_icon,
      },
      deps.devicePolicies.resolve(exchange.client.clientId),
      { geo: deps.geo, ip: exchange.request.ip },
    );
  },
  (_deps, exchange, checked) => {
    exchange.checked = checked;
  },
);

/**
 * A proof here binds the request to its key (draft-parecki-oauth-dpop-device-flow): the request
 * itself needs it, so it is recorded as used at once, before the codes are issued. Without a proof
 * nothing is awaited.
 */
const spendDpopProofAtOnce = guard(function spendDpopProofAtOnce(_deps, exchange: DeviceAuthorizationExchange) {
  return exchange.dpopJkt === null ? undefined : exchange.spendProof();
});

/** RFC 8628 §3.2: the device code, the user code and where to enter it. */
const issueCodes = answeredBy(function issueCodes(deps, exchange: DeviceAuthorizationExchange) {
  const { request } = exchange;
  return requestDeviceAuthorization(deps, exchange.client, exchange.checked, exchange.dpopJkt, {
    ip: request.ip,
    userAgent: request.headers['user-agent'],
  });
});

// RFC 8628 §3.1 / §3.2
const deviceAuthorizationEndpoint: ProtocolEndpoint<DeviceAuthorizationExchange> = {
  defences: [limitPerAddress('deviceCodePerIp'), readForm(deviceCodeForm), identifyRequestClient, checkRequest, spendAppBudget('deviceCodePerClient')],
  work: [checkDpopProofIfSent, spendDpopProofAtOnce, issueCodes],
  response: (exchange) => exchange.response,
  takesDpopProofs: true,
};

export function deviceAuthorizationRoutes(app: FastifyInstance, deps: Deps): void {
  const url = endpoints(deps.config.issuer).device_authorization_endpoint;
  app.post('/oauth/device/code', (request, reply) =>
    serveProtocolRequest(deps, deviceAuthorizationEndpoint, new DeviceAuthorizationExchange(request, url), reply),
  );
}
