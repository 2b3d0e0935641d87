import { isIPv4, isIPv6 } from 'node:net';

/**
 * Whether an IP address is one the server may connect to on a stranger's behalf: a public unicast
 * address of the Internet. Everything else is refused, so a URL sent by a device cannot make the
 * server reach its own host, its network or a cloud metadata service (SSRF).
 */

type Prefix = readonly [bytes: readonly number[], length: number];

/** RFC 6890 and the IANA special-purpose registries: no IPv4 address here is a public host. */
const NOT_PUBLIC_V4: readonly Prefix[] = [
  [[0], 8], // "this network"
  [[10], 8], // private (RFC 1918)
  [[100, 64], 10], // shared address space, carrier-grade NAT (RFC 6598)
  [[127], 8], // loopback
  [[169, 254], 16], // link-local, where cloud metadata services answer
  [[172, 16], 12], // private
  [[192, 0, 0], 24], // IETF protocol assignments
  [[192, 0, 2], 24], // documentation (TEST-NET-1)
  [[192, 88, 99], 24], // 6to4 relay anycast (deprecated)
  [[192, 168], 16], // private
  [[198, 18], 15], // benchmarking
  [[198, 51, 100], 24], // documentation (TEST-NET-2)
  [[203, 0, 113], 24], // documentation (TEST-NET-3)
  [[224], 4], // multicast
  [[240], 4], // reserved, and the broadcast address
];

const LOOPBACK_V4: Prefix = [[127], 8];

/**
 * IPv6 is refused outside global unicast (2000::/3): that alone rules out the unspecified and
 * loopback addresses, IPv4-compatible forms, discard-only, unique-local (fc00::/7), link-local,
 * site-local and multicast. Inside it, these are not public hosts either.
 */
const GLOBAL_UNICAST_V6: Prefix = [[0x20], 3];
const NOT_PUBLIC_IN_GLOBAL_V6: readonly Prefix[] = [
  [[0x20, 0x01, 0x00], 23], // IETF protocol assignments: Teredo, ORCHID, benchmarking…
  [[0x20, 0x01, 0x0d, 0xb8], 32], // documentation
  [[0x20, 0x02], 16], // 6to4: an IPv4 address inside, of any kind
  [[0x3f, 0xff, 0x00], 20], // documentation (RFC 9637)
];

/** Forms that carry an IPv4 address in their last four bytes, which decides. */
const IPV4_MAPPED: Prefix = [[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff], 96];
const NAT64_WELL_KNOWN: Prefix = [[0x00, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0], 96];

const LOOPBACK_V6 = [...Array<number>(15).fill(0), 1];

function inPrefix(address: readonly number[], [bytes, length]: Prefix): boolean {
  for (let bit = 0; bit < length; bit += 8) {
    const bitsHere = Math.min(8, length - bit);
    const mask = (0xff << (8 - bitsHere)) & 0xff;
    if (((address[bit / 8] ?? 0) & mask) !== ((bytes[bit / 8] ?? 0) & mask)) return false;
  }
  return true;
}

function parseV4(address: string): number[] {
  return address.split('.').map(Number);
}

/** The 16 bytes of a valid IPv6 address (with "::", an IPv4 tail, or a zone id). */
function parseV6(address: string): number[] {
  const withoutZone = address.split('%')[0] ?? '';
  const [head = '', tail] = withoutZone.split('::') as [string, string | undefined];
  const groups = (part: string): number[] => {
    if (part === '') return [];
    return part.split(':').flatMap((group) => {
      if (group.includes('.')) {
        const [a = 0, b = 0, c = 0, d = 0] = parseV4(group);
        return [(a << 8) | b, (c << 8) | d];
      }
      return [parseInt(group, 16)];
    });
  };
  const before = groups(head);
  const after = tail === undefined ? [] : groups(tail);
  const words = [...before, ...Array<number>(8 - before.length - after.length).fill(0), ...after];
  return words.flatMap((word) => [word >> 8, word & 0xff]);
}

export interface AddressRule {
  /** Tests only (ICON_FETCH_ALLOW_LOOPBACK, EVENTS_ALLOW_LOOPBACK): a server on this machine stands for the Internet. */
  allowLoopback: boolean;
}

function isPublicV4(bytes: readonly number[], rule: AddressRule): boolean {
  if (rule.allowLoopback && inPrefix(bytes, LOOPBACK_V4)) return true;
  return !NOT_PUBLIC_V4.some((prefix) => inPrefix(bytes, prefix));
}

/** True only for a well-formed IPv4 or IPv6 address that is public under `rule`. */
export function isPublicAddress(address: string, rule: AddressRule): boolean {
  if (isIPv4(address)) return isPublicV4(parseV4(address), rule);
  if (!isIPv6(address)) return false;
  const bytes = parseV6(address);
  if (inPrefix(bytes, IPV4_MAPPED) || inPrefix(bytes, NAT64_WELL_KNOWN)) return isPublicV4(bytes.slice(12), rule);
  if (rule.allowLoopback && bytes.every((byte, i) => byte === LOOPBACK_V6[i])) return true;
  // A zone id names an interface: only link-local addresses have one.
  if (address.includes('%')) return false;
  return inPrefix(bytes, GLOBAL_UNICAST_V6) && !NOT_PUBLIC_IN_GLOBAL_V6.some((prefix) => inPrefix(bytes, prefix));
}

/** True for 127.0.0.0/8, ::1 and an IPv4-mapped loopback address. */
export function isLoopbackAddress(address: string): boolean {
  if (isIPv4(address)) return inPrefix(parseV4(address), LOOPBACK_V4);
  if (!isIPv6(address)) return false;
  const bytes = parseV6(address);
  if (inPrefix(bytes, IPV4_MAPPED)) return inPrefix(bytes.slice(12), LOOPBACK_V4);
  return !address.includes('%') && bytes.every((byte, i) => byte === LOOPBACK_V6[i]);
}
