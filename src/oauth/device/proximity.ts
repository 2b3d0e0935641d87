import type { Geo, Place } from '../../geo/locate.js';
import { parseAddress, sharePrefix } from '../../geo/ip-address.js';

/**
 * Device-code phishing (draft-ietf-oauth-cross-device-security §6, proximity): the attacker starts
 * the flow on their own machine and talks the victim into approving it. What can be compared is
 * where the request came from, where the approver is, and where the tokens are collected from.
 * Each signal below is a reason for doubt; the operator decides per signal what it costs
 * (PolicyAction). No signal is ever hidden by a match: "same network" is said only when none is
 * raised, and a shared AS is only ever named, never taken for proximity.
 */
export type ProximitySignal = 'country_mismatch' | 'hosting_network' | 'relay_network' | 'unknown_location' | 'redeemer_mismatch';

/** allow: nothing shown; warn: the warning; confirm: the warning and one more explicit step; deny: refused. */
export type PolicyAction = 'allow' | 'warn' | 'confirm' | 'deny';
const STRENGTH: Record<PolicyAction, number> = { allow: 0, warn: 1, confirm: 2, deny: 3 };

export type ProximityPolicy = Record<ProximitySignal, PolicyAction>;

/** What proximity is judged with: the operator's policy and what "the same network" means for IPv6. */
export interface ProximityRules {
  proximityPolicy: ProximityPolicy;
  /** Two IPv6 addresses in one prefix of this length are one network (PROXIMITY_SAME_NETWORK_IPV6_PREFIX). */
  sameNetworkIpv6Prefix: number;
}

/** What is known of one side, as stored with the decision and shown on the page. */
export interface SideContext {
  address: string;
  kind: Place['kind'];
  country: string | null;
  /** Only with a City database (GEOIP_DATABASE). */
  city: string | null;
  network: string | null;
  asn: number | null;
  hosting: boolean;
  relay: boolean;
}

export interface ProximityAssessment {
  requester: SideContext;
  approver: SideContext;
  /**
   * The same public address (or the same IPv6 prefix), on no relay or hosting network, and no
   * signal raised: the only case the page says "this device appears to be on your network".
   */
  sameNetwork: boolean;
  /**
   * Both sides in one AS, without the same address: the provider's name, for a weaker statement
   * that never speaks of "your network" and never hides a signal. Null otherwise, and always for
   * a relay or hosting AS, where millions of strangers share one number.
   */
  sameProvider: string | null;
  signals: ProximitySignal[];
  /** The strongest action the policy names for the signals raised. */
  action: PolicyAction;
}

function side(place: Place): SideContext {
  return {
    address: place.address,
    kind: place.kind,
    country: place.country,
    city: place.city,
    network: place.network,
    asn: place.asn,
    hosting: place.hosting,
    relay: place.relay,
  };
}

/** A place that can be compared: a public address the data locates in a country. Never a proxy's. */
function located(place: SideContext): boolean {
  return place.kind === 'public' && place.country !== null;
}

/** The same public address, or the same IPv6 prefix of `ipv6Prefix` bits. */
function sameAddress(a: SideContext, b: SideContext, ipv6Prefix: number): boolean {
  if (a.kind !== 'public' || b.kind !== 'public') return false;
  const first = parseAddress(a.address);
  const second = parseAddress(b.address);
  return first !== null && second !== null && sharePrefix(first, second, ipv6Prefix);
}

function strongest(signals: readonly ProximitySignal[], policy: ProximityPolicy): PolicyAction {
  return signals.reduce<PolicyAction>((action, signal) => (STRENGTH[policy[signal]] > STRENGTH[action] ? policy[signal] : action), 'allow');
}

/**
 * Signals of one place that asks or collects, compared with the approver: every check always runs,
 * whatever the two have in common. `approverJudged`: the approver's own place was judged already
 * (at the approval page), so only this place's being unknown counts here.
 */
function placeSignals(place: SideContext, approver: SideContext, approverJudged = false): ProximitySignal[] {
  const signals: ProximitySignal[] = [];
  if (located(place) && located(approver) && place.country !== approver.country) {
    signals.push('country_mismatch');
  }
  if (place.hosting) signals.push('hosting_network');
  if (place.relay) signals.push('relay_network');
  // Nothing to compare on one side or the other: loopback, private, link-local, reserved, a
  // proxy's own address, or a public address the data does not place.
  if (!located(place) || (!approverJudged && !located(approver))) signals.push('unknown_location');
  return signals;
}

/** Compares the requester with the approver and applies the operator's policy. */
export function assessProximity(geo: Geo, requesterIp: string | null, approverIp: string, rules: ProximityRules): ProximityAssessment {
  const requester = side(geo.locate(requesterIp ?? ''));
  const approver = side(geo.locate(approverIp));
  const signals = placeSignals(requester, approver);
  const sameNetwork = signals.length === 0 && sameAddress(requester, approver, rules.sameNetworkIpv6Prefix);
  const sharedAs = !sameNetwork && requester.asn !== null && requester.asn === approver.asn && !requester.hosting && !requester.relay;
  const sameProvider = sharedAs ? (requester.network ?? `AS${requester.asn}`) : null;
  return { requester, approver, sameNetwork, sameProvider, signals, action: strongest(signals, rules.proximityPolicy) };
}

/** Country, AS and hosting class: what a place that takes over from another must share with it. */
function sameClass(a: SideContext, b: SideContext): boolean {
  return a.kind === b.kind && a.country === b.country && a.asn === b.asn && a.hosting === b.hosting && a.relay === b.relay;
}

/** Whether `later` is in another country, AS or hosting class than `earlier` (a refresh retry, a redeemer). */
export function movedClass(geo: Geo, earlierIp: string | null, laterIp: string): boolean {
  return !sameClass(side(geo.locate(earlierIp ?? '')), side(geo.locate(laterIp)));
}

/** What the redeeming poll's place came to: warn is recorded on the grant, deny refuses the request for good. */
export interface RedeemerAssessment {
  redeemer: SideContext;
  /** The request's two other places, located for the comparison (and kept on the grant as its origin). */
  requester: SideContext;
  approver: SideContext;
  signals: ProximitySignal[];
  /** confirm counts as warn here: at a poll there is nobody to confirm anything. */
  action: 'allow' | 'warn' | 'deny';
}

/**
 * RFC 10027 §6 / issue 27 §3: the poll that would collect the tokens is judged like the request.
 * At the request's own address (or prefix), or the approver's, nothing is new: the approval page
 * judged that place. Anywhere else its country (against the approver's), hosting, relay and
 * unknown-location signals are raised under the same policies, and `redeemer_mismatch` when it is
 * in another country, AS or hosting class than the request.
 */
export function assessRedeemer(
  geo: Geo,
  request: { requesterIp: string | null; approverIp: string | null },
  redeemerIp: string,
  rules: ProximityRules,
): RedeemerAssessment {
  const redeemer = side(geo.locate(redeemerIp));
  const requester = side(geo.locate(request.requesterIp ?? ''));
  const approver = side(geo.locate(request.approverIp ?? ''));
  const prefix = rules.sameNetworkIpv6Prefix;
  if (sameAddress(redeemer, requester, prefix) || sameAddress(redeemer, approver, prefix))
    return { redeemer, requester, approver, signals: [], action: 'allow' };
  const signals = placeSignals(redeemer, approver, true);
  if (!sameClass(redeemer, requester)) signals.push('redeemer_mismatch');
  const action = strongest(signals, rules.proximityPolicy);
  return { redeemer, requester, approver, signals, action: action === 'confirm' ? 'warn' : action };
}

/**
 * Issue 27 §3: a device-flow grant refreshed from another country than its approver was in, or
 * from a hosting network. The signals, or null when there is nothing to record: not a device-flow
 * grant, nothing raised, or the same class of place as the grant's previous use (recorded then).
 */
export function refreshedElsewhere(geo: Geo, grant: { approverIp: string | null; previousIp: string | null }, ip: string): ProximitySignal[] | null {
  // The same address as the previous use is the same class of place: nothing to locate (most refreshes).
  if (grant.approverIp === null || grant.previousIp === ip) return null;
  const refresher = side(geo.locate(ip));
  const approver = side(geo.locate(grant.approverIp));
  const signals: ProximitySignal[] = [];
  if (located(refresher) && located(approver) && refresher.country !== approver.country) signals.push('country_mismatch');
  if (refresher.hosting) signals.push('hosting_network');
  if (signals.length === 0 || !movedClass(geo, grant.previousIp, ip)) return null;
  return signals;
}
