import type { Place } from '../geo/locate.js';
import type { PolicyAction, ProximitySignal } from './device/proximity.js';

/**
 * Issue 31 §1: where a grant came from, kept on the grant for as long as it lives, so that an
 * operator can find a device-code phishing campaign by its networks and approval times, and undo
 * it, long after its requests were purged. Computed at issuance from what the issuing statement
 * returned and the in-memory location data: no round trip of its own.
 */

/** One side of a grant (requester, approver, redeemer) as located when the grant was issued. */
export interface PlaceOrigin {
  /** Canonical (Place.address), at most 64 characters. */
  address: string;
  asn: number | null;
  /** The AS organisation, cut to NETWORK_NAME_MAX characters. */
  network: string | null;
  /** ISO 3166-1 alpha-2. */
  country: string | null;
  hosting: boolean;
}

export interface GrantOrigin {
  /** When the user agreed: the device flow's approval, the code flow's consent. */
  approvedAt: Date;
  /** Device flow: the device that asked for the code. Code flow: where the user signed in and agreed. */
  requester: PlaceOrigin | null;
  /** Device flow only: where the user approved. */
  approver: PlaceOrigin | null;
  /** Device flow only: where the tokens were collected from. */
  redeemer: PlaceOrigin | null;
  /** Device flow only: what the approval page raised and decided, and whether its box was ticked. */
  approvalSignals: ProximitySignal[] | null;
  decision: PolicyAction | null;
  confirmed: boolean | null;
}

/** As bounded by the table (grants_networks_bounded). */
const NETWORK_NAME_MAX = 200;
const ADDRESS_MAX = 64;
const MAX_ASN = 4_294_967_295;

/** Only what the grants table accepts: a located place's bounded fields, nothing a proxy could stretch. */
export function placeOrigin(place: Pick<Place, 'address' | 'asn' | 'network' | 'country' | 'hosting'>): PlaceOrigin {
  const asn = place.asn !== null && Number.isInteger(place.asn) && place.asn >= 0 && place.asn <= MAX_ASN ? place.asn : null;
  return {
    address: place.address.slice(0, ADDRESS_MAX),
    asn,
    network: place.network === null ? null : place.network.slice(0, NETWORK_NAME_MAX),
    country: place.country !== null && /^[A-Z]{2}$/.test(place.country) ? place.country : null,
    hosting: place.hosting,
  };
}

const SIGNALS = new Set<string>(['country_mismatch', 'hosting_network', 'relay_network', 'unknown_location', 'redeemer_mismatch']);
const ACTIONS = new Set<string>(['allow', 'warn', 'confirm', 'deny']);

/** What a device request's decision recorded (verification.ts decisionContext), read defensively: it is JSON of an older release too. */
export function approvalOf(decisionContext: unknown): Pick<GrantOrigin, 'approvalSignals' | 'decision' | 'confirmed'> {
  if (typeof decisionContext !== 'object' || decisionContext === null) return { approvalSignals: null, decision: null, confirmed: null };
  const { signals, action, confirmed } = decisionContext as { signals?: unknown; action?: unknown; confirmed?: unknown };
  return {
    approvalSignals: Array.isArray(signals) ? (signals.filter((s) => typeof s === 'string' && SIGNALS.has(s)) as ProximitySignal[]) : null,
    decision: typeof action === 'string' && ACTIONS.has(action) ? (action as PolicyAction) : null,
    confirmed: typeof confirmed === 'boolean' ? confirmed : null,
  };
}
