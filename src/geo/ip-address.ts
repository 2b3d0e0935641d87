import { isIP } from 'node:net';

export type AddressKind = 'public' | 'private' | 'loopback' | 'link-local' | 'unknown';

/** An address as numbers: IPv4 as one unsigned 32-bit value, IPv6 as four, most significant first. */
export type ParsedAddress = { version: 4; value: number; text: string } | { version: 6; words: Uint32Array; text: string };

/**
 * Parses an IPv4 or IPv6 address. An IPv4-mapped IPv6 address (::ffff:a.b.c.d, in either
 * notation) becomes the IPv4 address it carries, because a dual-stack socket reports IPv4 clients
 * that way. IPv6 text comes back in its canonical form (RFC 5952), so that one address has one
 * spelling when two places are compared; a zone (%eth0) is dropped, as it names an interface of
 * this machine, not anything about the peer.
 */
export function parseAddress(given: string): ParsedAddress | null {
  const version = isIP(given);
  if (version === 4) return { version: 4, value: ipv4Value(given), text: given };
  if (version !== 6) return null;
  const zone = given.indexOf('%');
  const bare = zone === -1 ? given : given.slice(0, zone);
  const bytes = Buffer.from(bare, 'latin1');
  const words = new Uint32Array(4);
  parseIPv6Bytes(bytes, 0, bytes.length, words, 0);
  if (words[0] === 0 && words[1] === 0 && words[2] === 0xffff) {
    const value = words[3]!;
    return { version: 4, value, text: formatIPv4(value) };
  }
  return { version: 6, words, text: formatIPv6(words) };
}

function ipv4Value(text: string): number {
  let value = 0;
  for (const part of text.split('.')) value = value * 256 + Number(part);
  return value;
}

function formatIPv4(value: number): string {
  return `${value >>> 24}.${(value >>> 16) & 255}.${(value >>> 8) & 255}.${value & 255}`;
}

/** RFC 5952 §4: lower case, no leading zeros, the longest run of two or more zero groups as "::" (the first on a tie). */
function formatIPv6(words: Uint32Array): string {
  const groups: number[] = [];
  for (const word of words) groups.push(word >>> 16, word & 0xffff);
  let bestStart = -1;
  let bestLength = 1;
  for (let i = 0; i < 8; ) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLength) {
      bestStart = i;
      bestLength = j - i;
    }
    i = j;
  }
  const hex = (from: number, to: number) =>
    groups
      .slice(from, to)
      .map((g) => g.toString(16))
      .join(':');
  if (bestStart === -1) return hex(0, 8);
  return `${hex(0, bestStart)}::${hex(bestStart + bestLength, 8)}`;
}

const COLON = 0x3a;
const DOT = 0x2e;

/** Reused by parseIPv6Bytes, which runs once per line of the shipped data: no allocation per call. */
const groupsScratch = new Uint16Array(8);

/**
 * Writes the 128 bits of the IPv6 text in bytes[from, to) as four 32-bit words into out[at..at+3].
 * The text must already be a valid address (net.isIP, or the shipped data): this only converts.
 * Works on bytes so that the shipped CSV can be read without making a string per address.
 */
export function parseIPv6Bytes(bytes: Uint8Array, from: number, to: number, out: Uint32Array, at: number): void {
  const groups = groupsScratch;
  let count = 0;
  let gap = -1;
  let i = from;
  if (bytes[i] === COLON && bytes[i + 1] === COLON) {
    gap = 0;
    i += 2;
  }
  while (i < to && count < 8) {
    let j = i;
    let value = 0;
    while (j < to && bytes[j] !== COLON && bytes[j] !== DOT) value = value * 16 + hexValue(bytes[j++]!);
    if (bytes[j] === DOT) {
      // An IPv4 address in the last 32 bits (::ffff:192.0.2.1): re-read the group as decimal.
      let v4 = 0;
      let octet = 0;
      for (j = i; j < to; j++) {
        const c = bytes[j]!;
        if (c === DOT) {
          v4 = v4 * 256 + octet;
          octet = 0;
        } else octet = octet * 10 + (c - 0x30);
      }
      v4 = v4 * 256 + octet;
      groups[count++] = v4 >>> 16;
      groups[count++] = v4 & 0xffff;
      break;
    }
    groups[count++] = value;
    if (j >= to) break;
    if (bytes[j + 1] === COLON) {
      gap = count;
      i = j + 2;
    } else i = j + 1;
  }
  const zeros = 8 - count;
  const group = (g: number) => (gap === -1 || g < gap ? groups[g]! : g < gap + zeros ? 0 : groups[g - zeros]!);
  for (let k = 0; k < 4; k++) out[at + k] = ((group(2 * k) << 16) | group(2 * k + 1)) >>> 0;
}

function hexValue(c: number): number {
  if (c <= 0x39) return c - 0x30;
  return (c | 0x20) - 0x57;
}

type Rule4 = readonly [first: string, prefixLength: number, kind: Exclude<AddressKind, 'public'>];

// IANA IPv4 Special-Purpose Address Registry (RFC 6890 and updates): the blocks that are not
// globally reachable. Anything else is public, whether or not the shipped data knows it.
const IPV4_RULES: readonly Rule4[] = [
  ['0.0.0.0', 8, 'unknown'], // "this network"
  ['10.0.0.0', 8, 'private'], // RFC 1918
  ['100.64.0.0', 10, 'private'], // RFC 6598 shared address space: behind a carrier's NAT
  ['127.0.0.0', 8, 'loopback'],
  ['169.254.0.0', 16, 'link-local'],
  ['172.16.0.0', 12, 'private'], // RFC 1918
  ['192.0.0.0', 24, 'unknown'], // IETF protocol assignments
  ['192.0.2.0', 24, 'unknown'], // TEST-NET-1 (documentation)
  ['192.168.0.0', 16, 'private'], // RFC 1918
  ['198.18.0.0', 15, 'unknown'], // benchmarking
  ['198.51.100.0', 24, 'unknown'], // TEST-NET-2
  ['203.0.113.0', 24, 'unknown'], // TEST-NET-3
  ['224.0.0.0', 4, 'unknown'], // multicast
  ['240.0.0.0', 4, 'unknown'], // reserved, and the limited broadcast address
];

const ipv4Rules = IPV4_RULES.map(([first, length, kind]) => ({
  mask: length === 0 ? 0 : (0xffffffff << (32 - length)) >>> 0,
  network: ipv4Value(first),
  kind,
}));

type Rule6 = readonly [first: string, prefixLength: number, kind: AddressKind];

// IANA IPv6 Special-Purpose Address Registry. Only 2000::/3 is allocated for global unicast, so
// the last rule makes everything outside it (and outside the blocks above it) unknown.
const IPV6_RULES: readonly Rule6[] = [
  ['::1', 128, 'loopback'],
  ['::', 128, 'unknown'], // unspecified
  ['fc00::', 7, 'private'], // unique local addresses (RFC 4193)
  ['fec0::', 10, 'private'], // deprecated site-local (RFC 3879), still private where used
  ['fe80::', 10, 'link-local'],
  ['2001:db8::', 32, 'unknown'], // documentation (RFC 3849)
  ['3fff::', 20, 'unknown'], // documentation (RFC 9637)
  ['2000::', 3, 'public'],
  ['::', 0, 'unknown'],
];

const ipv6Rules = IPV6_RULES.map(([first, length, kind]) => {
  const network = new Uint32Array(4);
  const bytes = Buffer.from(first, 'latin1');
  parseIPv6Bytes(bytes, 0, bytes.length, network, 0);
  return { network, length, kind };
});

function inPrefix6(words: Uint32Array, network: Uint32Array, length: number): boolean {
  for (let k = 0; k < 4 && length > 0; k++, length -= 32) {
    const mask = length >= 32 ? 0xffffffff : (0xffffffff << (32 - length)) >>> 0;
    if ((words[k]! & mask) >>> 0 !== network[k]) return false;
  }
  return true;
}

export function classify(address: ParsedAddress): AddressKind {
  if (address.version === 4) {
    for (const rule of ipv4Rules) if ((address.value & rule.mask) >>> 0 === rule.network) return rule.kind;
    return 'public';
  }
  for (const rule of ipv6Rules) if (inPrefix6(address.words, rule.network, rule.length)) return rule.kind;
  return 'unknown';
}

/** Whether two addresses share their first `length` bits: IPv6 only; two IPv4 addresses must be equal, and versions never mix. */
export function sharePrefix(a: ParsedAddress, b: ParsedAddress, length: number): boolean {
  if (a.version === 4) return b.version === 4 && a.value === b.value;
  if (b.version === 4) return false;
  const masked = b.words.map((word, k) => {
    const bits = Math.min(32, Math.max(0, length - 32 * k));
    return bits === 0 ? 0 : (word & ((0xffffffff << (32 - bits)) >>> 0)) >>> 0;
  });
  return inPrefix6(a.words, masked, Math.min(128, length));
}

/**
 * A test of "is this one of these addresses or networks", from entries such as TRUST_PROXY's:
 * `192.0.2.10`, `10.0.0.0/8`, `2001:db8::/32`. Entries that are neither (the names `loopback`,
 * `linklocal`, `uniquelocal` that fastify also accepts) match nothing here: those addresses are
 * never public anyway.
 */
export function addressMatcher(entries: readonly string[]): (address: ParsedAddress) => boolean {
  const networks: { network: ParsedAddress; length: number }[] = [];
  for (const entry of entries) {
    const [text = '', prefix] = entry.split('/');
    const network = parseAddress(text);
    if (network === null) continue;
    const width = network.version === 4 ? 32 : 128;
    const length = prefix === undefined ? width : Number(prefix);
    if (!Number.isInteger(length) || length < 0 || length > width) continue;
    networks.push({ network, length });
  }
  return (address) =>
    networks.some(({ network, length }) => {
      if (network.version === 4) {
        if (address.version !== 4) return false;
        const mask = length === 0 ? 0 : (0xffffffff << (32 - length)) >>> 0;
        return (network.value & mask) >>> 0 === (address.value & mask) >>> 0;
      }
      return sharePrefix(network, address, length);
    });
}
