import type { Config } from '../../config.js';
import type { Database } from '../../db/connect.js';
import { countDeviceFlowApps } from '../../repositories/device-policy.js';
import { DEVICE_CODE_GRANT } from '../metadata.js';
import { PROXIMITY_RULES, type PolicyRule } from './policy.js';
import type { PolicyAction, ProximitySignal } from './proximity.js';
import { USER_CODE_ALPHABET, USER_CODE_LENGTH } from './user-code.js';

/**
 * Issue 31 §2: a live self-assessment against RFC 10027 (Cross-Device Flows: Security Best
 * Current Practice), like Duende IdentityServer's conformance report: each mitigation with its
 * state as this server runs now, computed from the configuration, the device policy rules and what
 * the server has seen, never written down by hand.
 *
 * in_place: the mitigation works as the RFC recommends; partial: for some apps or signals only;
 * report_only: rules that only count; off: not applied; attention: set so that it protects less
 * than it seems to.
 */
export type MitigationState = 'in_place' | 'partial' | 'report_only' | 'off' | 'attention';

export interface Mitigation {
  id: string;
  mitigation: string;
  state: MitigationState;
  /** The settings it follows from, as the operator changes them. */
  settings: string[];
  detail: string;
}

export interface AssessmentInput {
  config: Config;
  db: Database;
  rules: readonly PolicyRule[];
  /** A forwarded request from a peer TRUST_PROXY does not name, seen recently (untrusted-forwarding.ts). */
  untrustedForwarding: { peer: string; last_seen: string } | null;
}

/** Longer than this, a code outlives what RFC 8628 §5.1 calls a short lifetime (its examples use up to 30 minutes). */
const LONG_CODE_SECONDS = 1800;
/** RFC 10027's advice on short-lived access tokens, read as the common hour. */
const LONG_ACCESS_TOKEN_SECONDS = 3600;

/** The signals the approval page judges (the redeeming poll also judges redeemer_mismatch). */
const REQUEST_SIGNALS = ['country_mismatch', 'hosting_network', 'relay_network', 'unknown_location'] as const satisfies readonly ProximitySignal[];

const strength: Record<PolicyAction, number> = { allow: 0, warn: 1, confirm: 2, deny: 3 };

function inForce(rules: readonly PolicyRule[], names: readonly string[]) {
  const active = rules.filter((r) => names.includes(r.rule) && r.mode !== 'off');
  return { enforced: active.filter((r) => r.mode === 'enforce'), reportOnly: active.filter((r) => r.mode === 'report-only') };
}

const describeRule = (rule: PolicyRule) => `${rule.rule} ${rule.mode} (${rule.clientId === null ? 'every app' : `app ${rule.clientId}`})`;

function proximityAtApproval(input: AssessmentInput): Mitigation {
  const { config, rules } = input;
  const policy = config.proximityPolicy;
  const allowed = REQUEST_SIGNALS.filter((signal) => policy[signal] === 'allow');
  const overrides = inForce(
    rules,
    Object.keys(PROXIMITY_RULES).filter((r) => r !== 'proximity-redeemer-mismatch'),
  );
  const weakened = overrides.enforced.filter(
    (r) => r.proximityAction !== null && strength[r.proximityAction] < strength[policy[PROXIMITY_RULES[r.rule as keyof typeof PROXIMITY_RULES]]],
  );
  const proxyBlind = config.trustProxy === false && input.untrustedForwarding !== null;
  const state: MitigationState = proxyBlind
    ? 'attention'
    : allowed.length === REQUEST_SIGNALS.length
      ? 'off'
      : allowed.length > 0 || weakened.length > 0
        ? 'partial'
        : 'in_place';
  const parts = [REQUEST_SIGNALS.map((signal) => `${signal}: ${policy[signal]}`).join(', ')];
  if (weakened.length > 0) parts.push(`weakened for some apps: ${weakened.map(describeRule).join('; ')}`);
  if (overrides.enforced.length + overrides.reportOnly.length > weakened.length)
    parts.push(`${overrides.enforced.length} enforced and ${overrides.reportOnly.length} report-only overrides`);
  if (proxyBlind)
    parts.push(
      `requests with X-Forwarded-For arrive from ${input.untrustedForwarding!.peer}, which TRUST_PROXY does not name: every party has the proxy's address`,
    );
  return {
    id: 'proximity_at_approval',
    mitigation: 'Proximity of the requesting device and the approver, judged at approval',
    state,
    settings: [
      'PROXIMITY_POLICY_COUNTRY_MISMATCH',
      'PROXIMITY_POLICY_HOSTING_NETWORK',
      'PROXIMITY_POLICY_RELAY_NETWORK',
      'PROXIMITY_POLICY_UNKNOWN_LOCATION',
      'TRUST_PROXY',
      'device-auth policy set proximity-*',
    ],
    detail: parts.join('; '),
  };
}

function proximityAtRedemption(input: AssessmentInput): Mitigation {
  const action = input.config.proximityPolicy.redeemer_mismatch;
  const overrides = inForce(input.rules, ['proximity-redeemer-mismatch']);
  const state: MitigationState = action === 'deny' ? 'in_place' : action === 'warn' ? 'partial' : 'off';
  return {
    id: 'proximity_at_redemption',
    mitigation: 'The poll that collects the tokens is judged against the request and the approver',
    state,
    settings: ['PROXIMITY_POLICY_REDEEMER_MISMATCH', 'device-auth policy set proximity-redeemer-mismatch'],
    detail:
      `redeemer_mismatch: ${action} (${action === 'deny' ? 'refused' : action === 'warn' ? 'recorded on the grant, tokens delivered' : 'not checked'})` +
      (overrides.enforced.length + overrides.reportOnly.length > 0
        ? `; overrides: ${[...overrides.enforced, ...overrides.reportOnly].map(describeRule).join('; ')}`
        : ''),
  };
}

function limit(name: string, value: { max: number; windowSeconds: number } | null): string {
  return `${name}: ${value === null ? 'off' : `${value.max}/${value.windowSeconds}s`}`;
}

export async function assess(input: AssessmentInput): Promise<Mitigation[]> {
  const { config, rules } = input;
  const limits = config.rateLimits;
  const apps = await countDeviceFlowApps(input.db, DEVICE_CODE_GRANT);
  const scopes = inForce(rules, ['device-scopes']);
  const place = inForce(rules, ['device-flow', 'device-countries', 'device-asns', 'device-hosting']);
  const reportOnly = rules.filter((r) => r.mode === 'report-only');
  const guessing = [limits.userCodePerUser, limits.userCodePerIp];
  const requestLimits = {
    deviceCodePerIp: limits.deviceCodePerIp,
    deviceCodePerClient: limits.deviceCodePerClient,
    tokenPerIp: limits.tokenPerIp,
    tokenPerClient: limits.tokenPerClient,
  };
  const requestLimitsOff = Object.entries(requestLimits)
    .filter(([, value]) => value === null)
    .map(([name]) => name);
  const weakWarnings = REQUEST_SIGNALS.filter((signal) => config.proximityPolicy[signal] === 'allow');
  return [
    proximityAtApproval(input),
    proximityAtRedemption(input),
    {
      id: 'code_lifetime',
      mitigation: 'Short-lived device and user codes',
      state: config.deviceCodeTtl > LONG_CODE_SECONDS ? 'attention' : 'in_place',
      settings: ['DEVICE_CODE_TTL'],
      detail: `codes expire after ${config.deviceCodeTtl} s${config.deviceCodeTtl > LONG_CODE_SECONDS ? ` (more than ${LONG_CODE_SECONDS} s)` : ''}; a phishing kit that asks for a fresh code per victim is not stopped by this alone`,
    },
    {
      id: 'one_time_codes',
      mitigation: 'A code is approved once and redeemed once',
      state: 'in_place',
      settings: [],
      detail: 'the approval and the redemption are each one conditional statement (pending -> approved -> redeemed); a replayed device_code gets invalid_grant',
    },
    {
      id: 'guessing_limits',
      mitigation: 'User codes cannot be guessed',
      state: guessing.every((l) => l === null) ? 'off' : guessing.some((l) => l === null) ? 'partial' : 'in_place',
      settings: ['RATE_LIMIT_USER_CODE_PER_USER', 'RATE_LIMIT_USER_CODE_PER_IP'],
      detail: `${USER_CODE_LENGTH} characters of a ${USER_CODE_ALPHABET.length}-letter alphabet (${Math.round(USER_CODE_LENGTH * Math.log2(USER_CODE_ALPHABET.length))} bits); ${limit('per user', limits.userCodePerUser)}, ${limit('per address', limits.userCodePerIp)}`,
    },
    {
      id: 'rate_limits',
      mitigation: 'Device requests and polls are rate limited per address and per app',
      state: requestLimitsOff.length === 0 ? 'in_place' : requestLimitsOff.length === Object.keys(requestLimits).length ? 'off' : 'partial',
      settings: ['RATE_LIMIT_DEVICE_CODE_PER_IP', 'RATE_LIMIT_DEVICE_CODE_PER_CLIENT', 'RATE_LIMIT_TOKEN_PER_IP', 'RATE_LIMIT_TOKEN_PER_CLIENT'],
      detail: [
        limit('device codes per address', limits.deviceCodePerIp),
        limit('per app', limits.deviceCodePerClient),
        limit('token requests per address', limits.tokenPerIp),
        limit('per app', limits.tokenPerClient),
      ].join(', '),
    },
    {
      id: 'scope_limits_per_app',
      mitigation: 'The scopes a device grant may carry are limited per app',
      state: scopes.enforced.some((r) => r.clientId === null)
        ? 'in_place'
        : scopes.enforced.length > 0
          ? 'partial'
          : scopes.reportOnly.length > 0
            ? 'report_only'
            : 'off',
      settings: ['device-auth policy set device-scopes', 'device-auth client update --scope'],
      detail:
        scopes.enforced.length + scopes.reportOnly.length === 0
          ? 'no device-scopes rule: a device grant may carry every scope its app is registered for'
          : [...scopes.enforced, ...scopes.reportOnly].map((r) => `${describeRule(r)}: ${(r.scopes ?? []).join(' ')}`).join('; '),
    },
    {
      id: 'device_requests_by_origin',
      mitigation: 'Device requests refused by where they come from (country, network, hosting) or the device flow switched off',
      state: place.enforced.length > 0 ? 'in_place' : place.reportOnly.length > 0 ? 'report_only' : 'off',
      settings: ['device-auth policy set device-flow | device-countries | device-asns | device-hosting'],
      detail: place.enforced.length + place.reportOnly.length === 0 ? 'no rule' : [...place.enforced, ...place.reportOnly].map(describeRule).join('; '),
    },
    {
      id: 'token_lifetimes',
      mitigation: 'Short-lived access tokens; refresh tokens rotate and their reuse revokes the grant',
      state: config.accessTokenTtl > LONG_ACCESS_TOKEN_SECONDS ? 'attention' : 'in_place',
      settings: ['ACCESS_TOKEN_TTL', 'REFRESH_TOKEN_TTL', 'ID_TOKEN_TTL'],
      detail: `access tokens ${config.accessTokenTtl} s, refresh tokens ${config.refreshTokenTtl} s (rotated at each use), ID tokens ${config.idTokenTtl} s`,
    },
    {
      id: 'sender_constrained_tokens',
      mitigation: 'Sender-constrained tokens (DPoP, RFC 9449)',
      state: apps.apps > 0 && apps.dpop === apps.apps ? 'in_place' : apps.dpop > 0 ? 'partial' : 'off',
      settings: ['device-auth client update --dpop', 'DPOP_NONCES'],
      detail: `${apps.dpop} of ${apps.apps} enabled device-flow apps must prove a DPoP key; any app may bind its tokens by sending proofs; nonces ${config.dpop.nonces ? 'on' : 'off'}`,
    },
    {
      id: 'decline_as_prominent_as_approve',
      mitigation: 'Declining is as prominent as approving',
      state: weakWarnings.length === 0 ? 'in_place' : 'partial',
      settings: ['PROXIMITY_POLICY_*'],
      detail:
        'Deny is a filled button beside Approve on every approval page, and the first, default one under any warning' +
        (weakWarnings.length > 0 ? `; no warning (so Approve stays first) for: ${weakWarnings.join(', ')}` : ''),
    },
    {
      id: 'report_only_rules',
      mitigation: 'Rules left in report-only protect nothing',
      state: reportOnly.length > 0 ? 'attention' : 'in_place',
      settings: ['device-auth policy set RULE enforce', 'device-auth policy report'],
      detail:
        reportOnly.length === 0
          ? 'no rule in report-only'
          : reportOnly.map((r) => `${describeRule(r)} since ${r.setAt.toISOString()}, would have refused ${r.wouldHaveRefused}`).join('; '),
    },
    {
      id: 'forwarded_addresses',
      mitigation: 'Client addresses are known (behind a proxy, TRUST_PROXY names it)',
      state: input.untrustedForwarding !== null ? 'attention' : 'in_place',
      settings: ['TRUST_PROXY'],
      detail:
        input.untrustedForwarding !== null
          ? `requests with X-Forwarded-For arrive from ${input.untrustedForwarding.peer} (last ${input.untrustedForwarding.last_seen}), which TRUST_PROXY does not name`
          : `TRUST_PROXY: ${config.trustProxy === false ? 'false' : config.trustProxy === true ? 'true (any peer)' : config.trustProxy.join(', ')}; no forwarded request from an untrusted peer seen`,
    },
  ];
}
