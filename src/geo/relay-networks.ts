/**
 * Autonomous systems whose addresses are shared egress for other people's traffic: consumer relays
 * and VPNs (Cloudflare WARP, iCloud Private Relay, Mullvad, Proton VPN), corporate security proxies
 * (Zscaler, Netskope, Cisco Umbrella) and the CDNs that carry them. One such address, and one such
 * AS, stands for many unrelated people in many countries: a phisher on the free WARP client in
 * Singapore and a victim on Private Relay in the United States are both Cloudflare (AS13335), and
 * may even share an address. So a relay network is never a match ("on your network", "same
 * provider"), and a request from one is a signal of its own (PROXIMITY_POLICY_RELAY_NETWORK).
 *
 * Where the list comes from (each operator names its own egress networks):
 * - iCloud Private Relay: Apple's egress list, https://mask-api.icloud.com/egress-ip-ranges.csv,
 *   described at https://developer.apple.com/support/prepare-your-network-for-icloud-private-relay/
 *   — its egress runs on Akamai (AS36183), Cloudflare (AS13335) and Fastly (AS54113).
 * - Cloudflare WARP: https://developers.cloudflare.com/warp-client/known-issues-and-faq/ and
 *   https://developers.cloudflare.com/cloudflare-one/connections/connect-devices/warp/deployment/firewall/
 *   (WARP egress from Cloudflare's own AS13335, e.g. 104.28.0.0/16 and 2a09:bac0::/29).
 * - Zscaler: https://config.zscaler.com (Zscaler's published egress ranges, AS22616, AS53813, AS62044).
 * - Netskope (AS55256), Cisco Umbrella / OpenDNS (AS36692), Mullvad (AS39351, "31173 Services AB"),
 *   Proton VPN (AS62371, AS209103): the provider's AS as its organisation name in the shipped data
 *   shows.
 * - CDNs that front other sites and carry relayed traffic: Akamai (AS20940, AS16625), Fastly
 *   (AS54113), Cloudflare London (AS209242).
 * `organisation` is the name the shipped ASN data (@ip-location-db/asn 2.3.2026061719) gives the
 * number; test/geo/locate.test.ts checks that every entry still has that name there.
 *
 * What it covers, and what not: whole ASes, so also a CDN's own servers (which do not ask for
 * device codes). VPN services that rent servers from hosting providers (most of them) are caught
 * by the hosting list (hosting-networks.ts) instead; residential proxies are caught by neither.
 */
export interface RelayNetwork {
  asn: number;
  organisation: string;
  kind: 'relay' | 'corporate-proxy' | 'vpn' | 'cdn';
}

export const RELAY_NETWORKS: readonly RelayNetwork[] = [
  // Cloudflare: WARP, one of iCloud Private Relay's egress operators, and the CDN
  { asn: 13335, organisation: 'Cloudflare, Inc.', kind: 'relay' },
  { asn: 209242, organisation: 'Cloudflare London, LLC', kind: 'relay' },
  // Akamai: iCloud Private Relay egress, and the CDN
  { asn: 36183, organisation: 'Akamai Technologies, Inc.', kind: 'relay' },
  { asn: 20940, organisation: 'Akamai International B.V.', kind: 'cdn' },
  { asn: 16625, organisation: 'Akamai Technologies, Inc.', kind: 'cdn' },
  // Fastly: iCloud Private Relay egress, and the CDN
  { asn: 54113, organisation: 'Fastly, Inc.', kind: 'relay' },
  // Zscaler
  { asn: 22616, organisation: 'ZSCALER, INC.', kind: 'corporate-proxy' },
  { asn: 53813, organisation: 'ZSCALER, INC.', kind: 'corporate-proxy' },
  { asn: 62044, organisation: 'Zscaler Switzerland GmbH', kind: 'corporate-proxy' },
  // Netskope
  { asn: 55256, organisation: 'Netskope Inc', kind: 'corporate-proxy' },
  // Cisco Umbrella (OpenDNS)
  { asn: 36692, organisation: 'Cisco OpenDNS, LLC', kind: 'corporate-proxy' },
  // Mullvad VPN
  { asn: 39351, organisation: '31173 Services AB', kind: 'vpn' },
  // Proton VPN
  { asn: 62371, organisation: 'Proton AG', kind: 'vpn' },
  { asn: 209103, organisation: 'Proton AG', kind: 'vpn' },
];
