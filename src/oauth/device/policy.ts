import type { Geo } from '../../geo/locate.js';
import { OAuthError, accessDenied, invalidScope, unauthorizedClient } from '../errors.js';
import type { PolicyAction, ProximityPolicy, ProximityRules, ProximitySignal } from './proximity.js';

/**
 * Issue 31 §2: the operator's device-flow rules, as data. Each is set per app or for every app and
 * has three modes: off, report-only (the answer is unchanged; the rule's counters and metric say
 * what it would have refused) and enforce. A request is judged by every rule in force for its app,
 * the global ones and the app's own, each on its own: the strictest wins. Proximity overrides are
 * different: they replace one PROXIMITY_POLICY_* action, the app's over the global one.
 *
 * Resolved once per request into a DevicePolicy (policies.ts), which the device authorization
 * request, the approval and the poll are handed, as node-oidc-provider hands its per-client
 * functions the client: nothing here reads a global.
 */
export const REQUEST_RULES = ['device-flow', 'device-scopes', 'device-countries', 'device-asns', 'device-hosting'] as const;

/** One override per proximity signal (PROXIMITY_POLICY_*), named as the CLI names rules. */
export const PROXIMITY_RULES = {
  'proximity-country-mismatch': 'country_mismatch',
  'proximity-hosting-network': 'hosting_network',
  'proximity-relay-network': 'relay_network',
  'proximity-unknown-location': 'unknown_location',
  'proximity-redeemer-mismatch': 'redeemer_mismatch',
} as const satisfies Record<string, ProximitySignal>;

export type RequestRuleName = (typeof REQUEST_RULES)[number];
export type ProximityRuleName = keyof typeof PROXIMITY_RULES;
export type RuleName = RequestRuleName | ProximityRuleName;
export const RULE_NAMES = [...REQUEST_RULES, ...(Object.keys(PROXIMITY_RULES) as ProximityRuleName[])] as readonly RuleName[];

export const RULE_MODES = ['off', 'report-only', 'enforce'] as const;
export type RuleMode = (typeof RULE_MODES)[number];

/** A rule as stored: which app (null: every app), its mode, its values, and its counts since it was set. */
export interface PolicyRule {
  ruleId: string;
  clientId: string | null;
  rule: RuleName;
  mode: RuleMode;
  /** device-scopes: the scopes a device grant of the app may carry. */
  scopes: readonly string[] | null;
  /** device-countries: whether `countries` are the only ones allowed, or the ones blocked. */
  countryList: 'allow' | 'block' | null;
  countries: readonly string[] | null;
  /** device-asns: blocked networks. */
  asns: readonly number[] | null;
  /** proximity-*: the action that replaces the PROXIMITY_POLICY_* one. */
  proximityAction: PolicyAction | null;
  revision: string;
  setAt: Date;
  refused: number;
  wouldHaveRefused: number;
}

/** Counts what a rule refused (enforce) or would have refused (report-only); policies.ts batches it. */
export type RefusalRecorder = (rule: PolicyRule, detail: string) => void;

export interface DevicePolicy {
  /** Rules judging every device request and poll of the app (device-flow and the place rules), in report-only or enforce. */
  readonly requestRules: readonly PolicyRule[];
  readonly scopeRules: readonly PolicyRule[];
  /** What proximity is judged with: PROXIMITY_POLICY_* with the enforced overrides applied. */
  readonly proximity: ProximityRules;
  /** The override deciding each signal, in report-only or enforce: counted when its action is deny. */
  readonly proximityOverrides: Readonly<Partial<Record<ProximitySignal, PolicyRule>>>;
  readonly record: RefusalRecorder;
}

/** The policy of an app no rule names: shared, and nothing to judge. */
export function basePolicy(proximity: ProximityRules, record: RefusalRecorder): DevicePolicy {
  return { requestRules: [], scopeRules: [], proximity, proximityOverrides: {}, record };
}

/**
 * The rules in force for one app: global ones, then the app's own; a rule set to off is no rule.
 * `record` counts the refusals of this app's requests (policies.ts keeps them per app, for the events).
 */
export function resolvePolicy(rules: readonly PolicyRule[], clientId: string, base: DevicePolicy, record: RefusalRecorder = base.record): DevicePolicy {
  const active = rules.filter((r) => r.mode !== 'off' && (r.clientId === null || r.clientId === clientId));
  if (active.length === 0) return base;
  const overrides: Partial<Record<ProximitySignal, PolicyRule>> = {};
  for (const rule of active) {
    if (!(rule.rule in PROXIMITY_RULES)) continue;
    const signal = PROXIMITY_RULES[rule.rule as ProximityRuleName];
    // The app's override wins over the global one.
    if (overrides[signal] === undefined || rule.clientId !== null) overrides[signal] = rule;
  }
  const proximityPolicy: ProximityPolicy = { ...base.proximity.proximityPolicy };
  for (const [signal, rule] of Object.entries(overrides) as [ProximitySignal, PolicyRule][]) {
    if (rule.mode === 'enforce' && rule.proximityAction !== null) proximityPolicy[signal] = rule.proximityAction;
  }
  return {
    requestRules: active.filter((r) => r.rule === 'device-flow' || r.rule === 'device-countries' || r.rule === 'device-asns' || r.rule === 'device-hosting'),
    scopeRules: active.filter((r) => r.rule === 'device-scopes'),
    proximity: { ...base.proximity, proximityPolicy },
    proximityOverrides: overrides,
    record,
  };
}

/** Where a device request or poll comes from, as the place rules see it. */
interface Origin {
  country: string | null;
  asn: number | null;
  hosting: boolean;
}

/** What the rule holds against a request from `origin`, or null when it lets it through. */
function placeRefusal(rule: PolicyRule, origin: Origin): string | null {
  switch (rule.rule) {
    case 'device-flow':
      return 'device flow off';
    case 'device-hosting':
      return origin.hosting ? 'hosting network' : null;
    case 'device-asns':
      return origin.asn !== null && (rule.asns ?? []).includes(origin.asn) ? `AS${origin.asn}` : null;
    case 'device-countries': {
      // An allow list lets through only the countries it names: an address the data does not place is not one of them.
      const listed = origin.country !== null && (rule.countries ?? []).includes(origin.country);
      return listed === (rule.countryList === 'block') ? `country ${origin.country ?? 'unknown'}` : null;
    }
    default:
      return null;
  }
}

/** The texts a device can show its user (RFC 8628 §3.5 error_description). */
const REFUSAL_TEXT = {
  flowOffRequest: 'the service has switched device sign-in off for this app; sign in another way or try again later',
  flowOffPoll: 'the service has switched device sign-in off for this app; this request was cancelled',
  place: "the service's policy does not accept device sign-ins from this device's network or country",
  scopes: (allowed: readonly string[]) => `the service's policy allows devices of this app only the scopes: ${allowed.join(' ') || '(none)'}`,
};

/**
 * Counts every rule that refuses and throws the error of the first one enforced; report-only
 * rules change nothing. Moving a rule from report-only to enforce changes only whether it throws.
 */
function settle(policy: DevicePolicy, refusals: readonly { rule: PolicyRule; detail: string; error: OAuthError }[]): void {
  let enforced: OAuthError | null = null;
  for (const { rule, detail, error } of refusals) {
    policy.record(rule, detail);
    if (rule.mode === 'enforce' && enforced === null) enforced = error;
  }
  if (enforced) throw enforced;
}

function originOf(geo: Geo, ip: string): Origin {
  const place = geo.locate(ip);
  return { country: place.country, asn: place.asn, hosting: place.hosting };
}

function placeRefusals(policy: DevicePolicy, geo: Geo, ip: string, flowOff: OAuthError, place: OAuthError) {
  const origin = originOf(geo, ip);
  const refusals: { rule: PolicyRule; detail: string; error: OAuthError }[] = [];
  for (const rule of policy.requestRules) {
    const detail = placeRefusal(rule, origin);
    if (detail !== null) refusals.push({ rule, detail, error: rule.rule === 'device-flow' ? flowOff : place });
  }
  return refusals;
}

/**
 * RFC 8628 §3.1: the device authorization request under the app's policy. `scopes` are those the
 * app's registration grants; the answer is the scopes the request gets. A scope rule narrows a
 * request that named none (the app's default) and refuses one that names a scope outside it.
 * The device-flow rule answers unauthorized_client (RFC 6749 §5.2: not for this grant type); a
 * place rule 403 access_denied.
 */
export function judgeDeviceRequest(policy: DevicePolicy, geo: Geo, request: { ip: string; scopes: string[]; scopeRequested: boolean }): string[] {
  if (policy.requestRules.length === 0 && policy.scopeRules.length === 0) return request.scopes;
  const refusals = placeRefusals(
    policy,
    geo,
    request.ip,
    unauthorizedClient(REFUSAL_TEXT.flowOffRequest),
    new OAuthError('access_denied', REFUSAL_TEXT.place, 403),
  );
  let scopes = request.scopes;
  for (const rule of policy.scopeRules) {
    const allowed = rule.scopes ?? [];
    const outside = scopes.filter((scope) => !allowed.includes(scope));
    if (outside.length === 0) continue;
    const narrowed = scopes.filter((scope) => allowed.includes(scope));
    // A request naming a scope the rule does not allow is refused; one naming none is narrowed, unless nothing is left.
    if (request.scopeRequested || narrowed.length === 0)
      refusals.push({ rule, detail: `scope ${outside.join(' ')}`, error: invalidScope(REFUSAL_TEXT.scopes(allowed)) });
    else if (rule.mode === 'enforce') scopes = narrowed;
  }
  settle(policy, refusals);
  if (scopes.length === 0) throw invalidScope(REFUSAL_TEXT.scopes([]));
  return scopes;
}

/**
 * RFC 8628 §3.4: a poll under the app's policy, before the poll's statement: a refused poll costs
 * no round trip. access_denied tells the device to stop polling (§3.5).
 */
export function refusePollByPolicy(policy: DevicePolicy, geo: Geo, ip: string): void {
  if (policy.requestRules.length === 0) return;
  const refused = accessDenied(REFUSAL_TEXT.flowOffPoll);
  settle(policy, placeRefusals(policy, geo, ip, refused, accessDenied(REFUSAL_TEXT.place)));
}

/** The poll that would collect the tokens: a request made before a scope rule must not carry more than it allows. */
export function judgeRedemptionScopes(policy: DevicePolicy, scopes: readonly string[]): void {
  const refusals = [];
  for (const rule of policy.scopeRules) {
    const outside = scopes.filter((scope) => !(rule.scopes ?? []).includes(scope));
    if (outside.length > 0) refusals.push({ rule, detail: `scope ${outside.join(' ')}`, error: accessDenied(REFUSAL_TEXT.scopes(rule.scopes ?? [])) });
  }
  settle(policy, refusals);
}

/**
 * The proximity overrides that deny one of the signals raised: an enforced one refused (the
 * assessment, made with policy.proximity, already says deny), a report-only one would have.
 */
export function countProximityOverrides(policy: DevicePolicy, signals: readonly ProximitySignal[]): void {
  for (const signal of signals) {
    const rule = policy.proximityOverrides[signal];
    if (rule?.proximityAction === 'deny') policy.record(rule, signal);
  }
}
