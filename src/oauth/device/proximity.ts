import type { Geo, Place } from '../../geo/locate.js';

/**
 * Device-code phishing (draft-ietf-oauth-cross-device-security): the attacker starts the flow on
 * their own machine and talks the victim into approving it. What can be compared is where the
 * request came from and where the approver is. Each signal below is a reason for doubt; the
 * operator decides per signal what it costs the approver (PolicyAction).
 */
export type ProximitySignal = 'country_mismatch' | 'hosting_network' | 'unknown_location';
export const PROXIMITY_SIGNALS: readonly ProximitySignal[] = ['country_mismatch', 'hosting_network', 'unknown_location'];

/** allow: nothing shown; warn: the warning; confirm: the warning and one more explicit step; deny: refused. */
export type PolicyAction = 'allow' | 'warn' | 'confirm' | 'deny';
const STRENGTH: Record<PolicyAction, number> = { allow: 0, warn: 1, confirm: 2, deny: 3 };

export type ProximityPolicy = Record<ProximitySignal, PolicyAction>;

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
}

export interface ProximityAssessment {
  requester: SideContext;
  approver: SideContext;
  /** Same public address, or the same network (AS): "this device appears to be on your network". */
  sameNetwork: boolean;
  signals: ProximitySignal[];
  /** The strongest action the policy names for the signals raised. */
  action: PolicyAction;
}

function side(place: Place): SideContext {
  return { address: place.address, kind: place.kind, country: place.country, city: place.city, network: place.network, asn: place.asn, hosting: place.hosting };
}

/** Compares the requester with the approver and applies the operator's policy. */
export function assessProximity(geo: Geo, requesterIp: string | null, approverIp: string, policy: ProximityPolicy): ProximityAssessment {
  const requesterPlace = geo.locate(requesterIp ?? '');
  const approverPlace = geo.locate(approverIp);
  const requester = side(requesterPlace);
  const approver = side(approverPlace);
  const sameAddress = requesterIp !== null && requesterPlace.address === approverPlace.address;
  const sameNetwork = sameAddress || (requester.asn !== null && requester.asn === approver.asn);
  const signals: ProximitySignal[] = [];
  if (!sameNetwork) {
    if (requester.country !== null && approver.country !== null && requester.country !== approver.country) signals.push('country_mismatch');
    if (requester.hosting) signals.push('hosting_network');
    // Nothing to compare: the request's place is not known (a private or unknown address that is
    // not the approver's own).
    if (requester.country === null) signals.push('unknown_location');
  }
  const action = signals.reduce<PolicyAction>((strongest, signal) => (STRENGTH[policy[signal]] > STRENGTH[strongest] ? policy[signal] : strongest), 'allow');
  return { requester, approver, sameNetwork, signals, action };
}
