import { beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';
import { loadGeo, type Geo } from '../../src/geo/locate.js';
import { assessProximity, assessRedeemer, type PolicyAction, type ProximityPolicy, type ProximitySignal } from '../../src/oauth/device/proximity.js';

/**
 * Issue 27 §6: requester/approver address pairs with the notice the approval page gets and the
 * decision under each policy, judged from the shipped location data (@ip-location-db, the
 * hosting and relay lists), not from mocks. Every address is real and public unless its comment
 * says otherwise; what the data says of it is in the comment.
 *
 * Policies: `default` is the shipped configuration (country and hosting and relay confirm,
 * unknown warn); `deny` sets every PROXIMITY_POLICY_* to deny; `warn` every one to warn; `allow`
 * every one to allow.
 */

// A balancer this server trusts (TRUST_PROXY), on a public address: its own address says nothing.
const PROXY = '88.198.0.10';
const PROXY_V6_NETWORK = '2a01:4f8:0:a::/64';

const POLICIES = {
  default: { country_mismatch: 'confirm', hosting_network: 'confirm', relay_network: 'confirm', unknown_location: 'warn', redeemer_mismatch: 'warn' },
  deny: { country_mismatch: 'deny', hosting_network: 'deny', relay_network: 'deny', unknown_location: 'deny', redeemer_mismatch: 'deny' },
  warn: { country_mismatch: 'warn', hosting_network: 'warn', relay_network: 'warn', unknown_location: 'warn', redeemer_mismatch: 'warn' },
  allow: { country_mismatch: 'allow', hosting_network: 'allow', relay_network: 'allow', unknown_location: 'allow', redeemer_mismatch: 'allow' },
} as const satisfies Record<string, ProximityPolicy>;

type Notice = 'same_network' | `provider: ${string}` | 'none';

interface Pair {
  name: string;
  requester: string;
  approver: string;
  notice: Notice;
  signals: ProximitySignal[];
  /** Under the default policy; under deny, warn and allow it follows from whether any signal is raised (written out below). */
  defaultAction: PolicyAction;
}

const pair = (name: string, requester: string, approver: string, notice: Notice, signals: ProximitySignal[], defaultAction: PolicyAction): Pair => ({
  name,
  requester,
  approver,
  notice,
  signals,
  defaultAction,
});

const PAIRS: Pair[] = [
  // Same address, same /64
  pair('same address, home ISP (Telekom DE)', '79.192.0.1', '79.192.0.1', 'same_network', [], 'allow'),
  pair('same address, cable (Comcast US)', '73.0.0.1', '73.0.0.1', 'same_network', [], 'allow'),
  pair('same IPv6 /64, home ISP', '2003:e4:1:2::1', '2003:e4:1:2::ffff', 'same_network', [], 'allow'),
  pair('IPv6 in another /64 of the same ISP: the provider only', '2003:e4:1:2::1', '2003:e4:1:3::1', 'provider: Deutsche Telekom AG', [], 'allow'),
  pair('two addresses of one home ISP: the provider only', '79.192.0.1', '79.192.0.2', 'provider: Deutsche Telekom AG', [], 'allow'),
  pair('two addresses of one cable ISP: the provider only', '73.0.0.1', '73.0.0.2', 'provider: Comcast Cable Communications, LLC', [], 'allow'),
  pair('IPv4 and IPv6 of one ISP (dual stack): the provider only', '79.192.0.1', '2003:e4::1', 'provider: Deutsche Telekom AG', [], 'allow'),
  // IPv4-mapped IPv6 (a dual-stack socket's view of an IPv4 client)
  pair('IPv4-mapped IPv6 and the same IPv4 address', '::ffff:79.192.0.1', '79.192.0.1', 'same_network', [], 'allow'),
  pair('IPv4-mapped WARP Singapore vs WARP US', '::ffff:104.28.13.1', '104.28.0.1', 'none', ['country_mismatch', 'relay_network'], 'confirm'),
  pair('IPv4-mapped loopback', '::ffff:127.0.0.1', '127.0.0.1', 'none', ['unknown_location'], 'warn'),
  // CGNAT mobile carrier: one AS (and few addresses) for a whole country's phones
  pair('CGNAT carrier, two public addresses (T-Mobile US)', '172.56.0.1', '172.58.0.1', 'provider: T-Mobile USA, Inc.', [], 'allow'),
  pair('CGNAT carrier, the same public address: strangers can share it, yet it is the same address', '172.56.0.1', '172.56.0.1', 'same_network', [], 'allow'),
  pair('CGNAT shared space 100.64/10 (private) vs a public approver', '100.64.0.1', '79.192.0.1', 'none', ['unknown_location'], 'warn'),
  // Another country
  pair('another country, two home ISPs (US vs DE)', '73.0.0.1', '79.192.0.1', 'none', ['country_mismatch'], 'confirm'),
  pair('another country, two mobile carriers (ZA vs KE)', '41.0.0.1', '102.0.0.1', 'none', ['country_mismatch'], 'confirm'),
  // Same AS in different countries
  pair(
    'WARP Singapore (attacker) vs iCloud Private Relay US (victim), both AS13335',
    '104.28.13.1',
    '104.28.0.1',
    'none',
    ['country_mismatch', 'relay_network'],
    'confirm',
  ),
  pair('WARP UK vs WARP US, AS13335', '104.28.200.1', '104.28.0.1', 'none', ['country_mismatch', 'relay_network'], 'confirm'),
  pair('Hetzner Finland vs Hetzner Germany, AS24940', '95.216.0.1', '88.198.0.1', 'none', ['country_mismatch', 'hosting_network'], 'confirm'),
  pair('Mullvad Sweden vs Mullvad Netherlands, AS39351', '193.138.218.1', '185.65.134.1', 'none', ['country_mismatch', 'relay_network'], 'confirm'),
  // Relay, VPN, CDN egress: a signal, never a match
  pair('WARP, the very same egress address: still no match', '104.28.0.1', '104.28.0.1', 'none', ['relay_network'], 'confirm'),
  pair('WARP IPv6 in one /64: still no match', '2a09:bac0::1', '2a09:bac0::2', 'none', ['relay_network'], 'confirm'),
  pair('Private Relay on Akamai (TR) vs a German home', '172.225.0.1', '79.192.0.1', 'none', ['country_mismatch', 'relay_network'], 'confirm'),
  pair('Private Relay on Fastly (SE) vs a German home', '146.75.0.1', '79.192.0.1', 'none', ['country_mismatch', 'relay_network'], 'confirm'),
  pair('Zscaler egress (US) vs a US home', '165.225.0.1', '73.0.0.1', 'none', ['relay_network'], 'confirm'),
  pair('Akamai CDN (US) vs a US home', '23.32.0.1', '73.0.0.1', 'none', ['relay_network'], 'confirm'),
  pair('Cloudflare 1.1.1.1 (AU by whois) vs WARP US', '1.1.1.1', '104.28.0.1', 'none', ['country_mismatch', 'relay_network'], 'confirm'),
  pair(
    "a German home request, the approver on WARP US: the approver's relay is no signal, the country is",
    '79.192.0.1',
    '104.28.0.1',
    'none',
    ['country_mismatch'],
    'confirm',
  ),
  // Cloud vs cloud
  pair('EC2 Korea (attacker) vs a corporate VPN on AWS US (victim)', '3.34.0.1', '3.80.0.1', 'none', ['country_mismatch', 'hosting_network'], 'confirm'),
  pair('EC2 Korea vs EC2 Korea, one AS: no provider statement for a cloud', '3.34.0.1', '13.125.0.1', 'none', ['hosting_network'], 'confirm'),
  pair('EC2 US vs AWS US, one country', '52.0.0.1', '3.80.0.1', 'none', ['hosting_network'], 'confirm'),
  pair('the same AWS address: still a hosting network, no match', '3.80.0.1', '3.80.0.1', 'none', ['hosting_network'], 'confirm'),
  pair('Hetzner IPv6 in one /64: still a hosting network', '2a01:4f8::1', '2a01:4f8::2', 'none', ['hosting_network'], 'confirm'),
  pair('Hetzner Germany vs DigitalOcean Netherlands', '88.198.0.1', '5.101.96.1', 'none', ['country_mismatch', 'hosting_network'], 'confirm'),
  pair('Google (US) vs a US home', '8.8.8.8', '73.0.0.1', 'none', ['hosting_network'], 'confirm'),
  pair("a hosting network in the approver's own country", '88.198.0.1', '79.192.0.1', 'none', ['hosting_network'], 'confirm'),
  // Private, loopback, link-local, reserved: location unknown on either side, never a match
  pair('private vs public', '10.0.0.5', '79.192.0.1', 'none', ['unknown_location'], 'warn'),
  pair('public vs private (the approver cannot be placed)', '79.192.0.1', '192.168.1.20', 'none', ['unknown_location'], 'warn'),
  pair('the same private address', '192.168.1.20', '192.168.1.20', 'none', ['unknown_location'], 'warn'),
  pair('loopback on both sides (no TRUST_PROXY behind a proxy)', '127.0.0.1', '127.0.0.1', 'none', ['unknown_location'], 'warn'),
  pair('IPv6 loopback on both sides', '::1', '::1', 'none', ['unknown_location'], 'warn'),
  pair('link-local vs public', '169.254.1.1', '79.192.0.1', 'none', ['unknown_location'], 'warn'),
  pair('IPv6 link-local on both sides', 'fe80::1', 'fe80::1', 'none', ['unknown_location'], 'warn'),
  pair('documentation range vs public', '203.0.113.7', '79.192.0.1', 'none', ['unknown_location'], 'warn'),
  pair('no address recorded vs public', '', '79.192.0.1', 'none', ['unknown_location'], 'warn'),
  pair(
    'a hosting request and an approver on a private network: both signals',
    '88.198.0.1',
    '10.1.2.3',
    'none',
    ['hosting_network', 'unknown_location'],
    'confirm',
  ),
  // The server's own trusted proxy
  pair("the trusted proxy's address on both sides", PROXY, PROXY, 'none', ['unknown_location'], 'warn'),
  pair("the trusted proxy's address vs a public approver", PROXY, '79.192.0.1', 'none', ['unknown_location'], 'warn'),
  pair("a public requester vs the trusted proxy's address", '79.192.0.1', PROXY, 'none', ['unknown_location'], 'warn'),
  pair("the trusted proxy's IPv6 network on both sides", '2a01:4f8:0:a::1', '2a01:4f8:0:a::2', 'none', ['unknown_location'], 'warn'),
];

let geo: Geo;
beforeAll(async () => {
  geo = await loadGeo({ trustedProxies: [PROXY, PROXY_V6_NETWORK] });
});

function noticeOf(assessment: { sameNetwork: boolean; sameProvider: string | null }): Notice {
  if (assessment.sameNetwork) return 'same_network';
  return assessment.sameProvider === null ? 'none' : `provider: ${assessment.sameProvider}`;
}

describe('proximity of requester and approver, from the shipped data', () => {
  it('covers at least 40 pairs', () => {
    expect(PAIRS.length).toBeGreaterThanOrEqual(40);
  });

  it.each(PAIRS)('$name ($requester vs $approver)', ({ requester, approver, notice, signals, defaultAction }) => {
    const rules = (policy: ProximityPolicy) => ({ proximityPolicy: policy, sameNetworkIpv6Prefix: 64 });
    const assessed = assessProximity(geo, requester === '' ? null : requester, approver, rules(POLICIES.default));
    expect({ notice: noticeOf(assessed), signals: [...assessed.signals].sort(), action: assessed.action }).toEqual({
      notice,
      signals: [...signals].sort(),
      action: defaultAction,
    });
    const raised = signals.length > 0;
    expect(assessProximity(geo, requester || null, approver, rules(POLICIES.deny)).action).toBe(raised ? 'deny' : 'allow');
    expect(assessProximity(geo, requester || null, approver, rules(POLICIES.warn)).action).toBe(raised ? 'warn' : 'allow');
    expect(assessProximity(geo, requester || null, approver, rules(POLICIES.allow)).action).toBe('allow');
    // "Your network" is never said while a signal is raised, and never for a relay or hosting AS.
    if (assessed.sameNetwork) expect(assessed.signals).toEqual([]);
  });

  it('PROXIMITY_SAME_NETWORK_IPV6_PREFIX: with 48, two /64s of one /48 are one network; with 128, only the same address', () => {
    const policy = POLICIES.default;
    expect(assessProximity(geo, '2003:e4:1:2::1', '2003:e4:1:3::1', { proximityPolicy: policy, sameNetworkIpv6Prefix: 48 }).sameNetwork).toBe(true);
    expect(assessProximity(geo, '2003:e4:1:2::1', '2003:e4:1:2::2', { proximityPolicy: policy, sameNetworkIpv6Prefix: 128 }).sameNetwork).toBe(false);
    expect(assessProximity(geo, '2003:e4:1:2::1', '2003:e4:1:2::1', { proximityPolicy: policy, sameNetworkIpv6Prefix: 128 }).sameNetwork).toBe(true);
  });
});

interface RedeemerCase {
  name: string;
  requester: string;
  approver: string;
  redeemer: string;
  signals: ProximitySignal[];
  /** Under the default policy (redeemer_mismatch warn), and with PROXIMITY_POLICY_REDEEMER_MISMATCH=deny only. */
  defaultAction: 'allow' | 'warn' | 'deny';
  mismatchDenyAction: 'allow' | 'warn' | 'deny';
}

const REDEEMERS: RedeemerCase[] = [
  {
    name: "the requester's own address",
    requester: '79.192.0.1',
    approver: '79.192.0.1',
    redeemer: '79.192.0.1',
    signals: [],
    defaultAction: 'allow',
    mismatchDenyAction: 'allow',
  },
  {
    name: "the requester's /64",
    requester: '2003:e4:1:2::1',
    approver: '79.192.0.1',
    redeemer: '2003:e4:1:2::9',
    signals: [],
    defaultAction: 'allow',
    mismatchDenyAction: 'allow',
  },
  {
    name: "the approver's own address",
    requester: '2003:e4:1:2::1',
    approver: '79.192.0.1',
    redeemer: '79.192.0.1',
    signals: [],
    defaultAction: 'allow',
    mismatchDenyAction: 'allow',
  },
  {
    name: "another address of the requester's ISP",
    requester: '79.192.0.1',
    approver: '79.192.0.1',
    redeemer: '79.192.0.2',
    signals: [],
    defaultAction: 'allow',
    mismatchDenyAction: 'allow',
  },
  {
    name: 'a residential request collected from AWS US',
    requester: '79.192.0.1',
    approver: '79.192.0.1',
    redeemer: '3.80.0.1',
    signals: ['country_mismatch', 'hosting_network', 'redeemer_mismatch'],
    defaultAction: 'warn',
    mismatchDenyAction: 'deny',
  },
  {
    name: 'a residential request collected from Hetzner in the same country',
    requester: '79.192.0.1',
    approver: '79.192.0.1',
    redeemer: '88.198.0.1',
    signals: ['hosting_network', 'redeemer_mismatch'],
    defaultAction: 'warn',
    mismatchDenyAction: 'deny',
  },
  {
    name: 'collected through WARP in Singapore',
    requester: '104.28.0.1',
    approver: '104.28.0.1',
    redeemer: '104.28.13.1',
    signals: ['country_mismatch', 'relay_network', 'redeemer_mismatch'],
    defaultAction: 'warn',
    mismatchDenyAction: 'deny',
  },
  {
    name: 'collected from another home ISP in the same country',
    requester: '79.192.0.1',
    approver: '79.192.0.1',
    redeemer: '37.120.0.1',
    signals: ['redeemer_mismatch'],
    defaultAction: 'warn',
    mismatchDenyAction: 'deny',
  },
  {
    name: "an approval recorded without the approver's address (before this check): only the redeemer's own place counts",
    requester: '79.192.0.1',
    approver: '',
    redeemer: '79.192.0.2',
    signals: [],
    defaultAction: 'allow',
    mismatchDenyAction: 'allow',
  },
  {
    name: 'a public request collected from a private address',
    requester: '79.192.0.1',
    approver: '79.192.0.1',
    redeemer: '192.168.1.20',
    signals: ['unknown_location', 'redeemer_mismatch'],
    defaultAction: 'warn',
    mismatchDenyAction: 'deny',
  },
  {
    name: 'loopback throughout (no TRUST_PROXY)',
    requester: '127.0.0.1',
    approver: '127.0.0.1',
    redeemer: '127.0.0.1',
    signals: ['unknown_location'],
    defaultAction: 'warn',
    mismatchDenyAction: 'warn',
  },
];

describe('the redeeming poll, compared with the request and the approver', () => {
  it.each(REDEEMERS)('$name', ({ requester, approver, redeemer, signals, defaultAction, mismatchDenyAction }) => {
    const rules = (policy: ProximityPolicy) => ({ proximityPolicy: policy, sameNetworkIpv6Prefix: 64 });
    const request = { requesterIp: requester, approverIp: approver === '' ? null : approver };
    const assessed = assessRedeemer(geo, request, redeemer, rules(POLICIES.default));
    expect({ signals: [...assessed.signals].sort(), action: assessed.action }).toEqual({ signals: [...signals].sort(), action: defaultAction });
    const mismatchDeny = { ...POLICIES.default, redeemer_mismatch: 'deny' } as const;
    expect(assessRedeemer(geo, request, redeemer, rules(mismatchDeny)).action).toBe(mismatchDenyAction);
  });
});

describe('the proximity settings', () => {
  it('defaults: relay confirm, redeemer mismatch warn, IPv6 /64', () => {
    const config = loadConfig({});
    expect(config.proximityPolicy).toMatchObject({ relay_network: 'confirm', redeemer_mismatch: 'warn' });
    expect(config.sameNetworkIpv6Prefix).toBe(64);
  });

  it.each([
    ['PROXIMITY_POLICY_REDEEMER_MISMATCH', 'confirm'],
    ['PROXIMITY_POLICY_RELAY_NETWORK', 'block'],
    ['PROXIMITY_SAME_NETWORK_IPV6_PREFIX', '16'],
    ['PROXIMITY_SAME_NETWORK_IPV6_PREFIX', '129'],
    ['PROXIMITY_SAME_NETWORK_IPV6_PREFIX', '64\u0000'],
  ])('%s=%s stops the server with an error naming it', (name, value) => {
    expect(() => loadConfig({ [name]: value })).toThrow(ConfigError);
    expect(() => loadConfig({ [name]: value })).toThrow(name);
  });
});
