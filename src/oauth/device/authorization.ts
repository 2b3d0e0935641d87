import type { Deps } from '../../deps.js';
import { addSeconds } from '../../lib/clock.js';
import { insertDeviceRequest } from '../../repositories/device-requests.js';
import { refuseIfDisabled, requireGrantType, type Client } from '../client-auth.js';
import { DEVICE_CODE_GRANT, endpoints } from '../metadata.js';
import { grantableScopes, userScopes } from '../scopes.js';
import { mintOpaque, TOKEN_PREFIX } from '../opaque-tokens.js';
import { generatePhraseChoices } from './phrases.js';
import { validatePlatformIcon, validatePlatformText } from './platform-text.js';
import { generateUserCode, userCodeHmac } from './user-code.js';
import { judgeDeviceRequest, type DevicePolicy } from './policy.js';
import type { Geo } from '../../geo/locate.js';

/** Where a request came from: kept with the request, shown to the user who is asked to approve it. */
export interface RequestOrigin {
  ip: string;
  userAgent: string | undefined;
}

/** Enough to recognise a device's software; the rest of a long header says nothing more. */
export const USER_AGENT_MAX = 256;

/** A header value as stored: control characters (never shown) dropped, bounded. */
function storedUserAgent(header: string | undefined): string | null {
  const text = header
    ?.replace(/[\u0000-\u001f\u007f-\u009f]/g, '')
    .trim()
    .slice(0, USER_AGENT_MAX);
  return text ? text : null;
}

export interface DeviceAuthorizationInput {
  scope: string[] | undefined;
  platform_name?: string | undefined;
  platform_description?: string | undefined;
  platform_icon?: string | undefined;
}

/** A device authorization request that passed checkDeviceAuthorization: what is stored of it. */
export interface CheckedDeviceAuthorization {
  scopes: string[];
  platform: { platform_name: string | null; platform_description: string | null; platform_icon: string | null };
}

/** RFC 8628 §3.2: the answer to an app whose devices show no confirmation phrase. */
export interface StandardDeviceAuthorizationResponse {
  device_code: string;
  user_code: string;
  verification_uri: string;
  verification_uri_complete: string;
  expires_in: number;
  interval: number;
}

/** RFC 8628 §3.2, plus the confirmation phrase the device must display (the default). */
export interface DeviceAuthorizationResponse extends StandardDeviceAuthorizationResponse {
  confirmation_phrase: string;
}

/**
 * A code is unique among kept requests (until an hour past their expiry). A collision among
 * ~2.6 × 10^10 codes is rare; a few tries make a failure practically impossible.
 */
const USER_CODE_ATTEMPTS = 5;

/**
 * Whatever refuses a device authorization request for what it is (the app's grant types, its
 * scopes, the platform fields) or where it comes from (the operator's device policy), without the
 * database: the route checks it before counting the request against the app's budget, so that a
 * request refused anyway never uses that budget.
 */
export function checkDeviceAuthorization(
  client: Client,
  input: DeviceAuthorizationInput,
  policy: DevicePolicy,
  origin: { geo: Geo; ip: string },
): CheckedDeviceAuthorization {
  // RFC 8628 §3.2 answers with RFC 6749 §5.2's errors: an app not registered for the grant is unauthorized_client.
  requireGrantType(client, DEVICE_CODE_GRANT);
  // An app's own scopes (ssf.*) are never a user's to grant.
  const registered = grantableScopes(input.scope, userScopes(client.allowedScopes));
  const scopes = judgeDeviceRequest(policy, origin.geo, {
    ip: origin.ip,
    scopes: registered,
    scopeRequested: input.scope !== undefined && input.scope.length > 0,
  });
  const platform = {
    platform_name: validatePlatformText('platform_name', input.platform_name),
    platform_description: validatePlatformText('platform_description', input.platform_description),
    platform_icon: validatePlatformIcon(input.platform_icon),
  };
  return { scopes, platform };
}

/**
 * RFC 8628 §3.1 / §3.2: issues a device code and a user code for a request that passed
 * checkDeviceAuthorization (checked once, by the endpoint's steps, before the app's budget).
 * `dpopJkt` is the key of the request's DPoP proof, if it carried one: every poll must then prove
 * it (draft-parecki-oauth-dpop-device-flow).
 */
export async function requestDeviceAuthorization(
  deps: Deps,
  client: Client,
  { scopes, platform }: CheckedDeviceAuthorization,
  dpopJkt: string | null,
  origin: RequestOrigin,
): Promise<DeviceAuthorizationResponse | StandardDeviceAuthorizationResponse> {
  const { config, clock } = deps;
  const deviceCode = mintOpaque(TOKEN_PREFIX.deviceCode);
  const { phrase, choices } = client.confirmationPhrase ? generatePhraseChoices() : { phrase: null, choices: null };
  const now = clock.now();

  for (let attempt = 0; attempt < USER_CODE_ATTEMPTS; attempt++) {
    const userCode = generateUserCode();
    const requestId = await insertDeviceRequest(deps.db, {
      device_code_hash: deviceCode.hash,
      user_code_hmac: userCodeHmac(deps.secrets.userCodeKey, userCode),
      client_id: client.clientId,
      scopes,
      ...platform,
      phrase,
      phrase_choices: choices,
      interval_seconds: config.devicePollInterval,
      created_at: now,
      expires_at: addSeconds(now, config.deviceCodeTtl),
      requester_ip: origin.ip,
      requester_user_agent: storedUserAgent(origin.userAgent),
      dpop_jkt: dpopJkt,
    });
    if (requestId === undefined) {
      // Disabled since it was identified, or the user code is taken: only the first needs a look.
      await refuseIfDisabled(deps.clients, client);
      continue;
    }
    // Never awaited: the device's host may take its two seconds, the device gets its code now.
    if (platform.platform_icon !== null) deps.platformIcons.giveLater(requestId, client.clientId, platform.platform_icon);
    deps.metrics.deviceCodesIssued.inc({ client_kind: client.kind });
    const e = endpoints(config.issuer);
    const verificationUri = client.kind === 'bot' ? e.activateBot : e.activate;
    return {
      device_code: deviceCode.value,
      user_code: userCode,
      verification_uri: verificationUri,
      verification_uri_complete: `${verificationUri}?user_code=${userCode}`,
      expires_in: config.deviceCodeTtl,
      interval: config.devicePollInterval,
      ...(phrase === null ? {} : { confirmation_phrase: phrase }),
    };
  }
  throw new Error('could not allocate a unique user code');
}
