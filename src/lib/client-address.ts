import { isIPv4, isIPv6 } from 'node:net';

/**
 * The key under which per-address limits count a client. An IPv6 host usually gets a whole /64
 * (RFC 6177), so one attacker can send from 2^64 addresses: per-address limits count IPv6
 * clients by network prefix (64 bits unless configured), IPv4 clients by address. An
 * IPv4-mapped IPv6 address (::ffff:192.0.2.1, what a dual-stack socket reports) is its IPv4
 * address. Anything else (no address at all) is kept as it is, bounded in length.
 */
export function addressKey(ip: string, ipv6Prefix: number): string {
  // The common case on the hot paths, decided without parsing.
  if (!ip.includes(':')) return isIPv4(ip) ? ip : ip.slice(0, 64);
  const bare = ip.split('%', 1)[0]!;
  if (!isIPv6(bare)) return ip.slice(0, 64);
  const groups = expandIPv6(bare);
  if (groups.slice(0, 5).every((g) => g === 0) && groups[5] === 0xffff) {
    return `${groups[6]! >> 8}.${groups[6]! & 0xff}.${groups[7]! >> 8}.${groups[7]! & 0xff}`;
  }
  return prefixKey(groups, ipv6Prefix);
}

/**
 * The networks a client address belongs to, from its own to the widest that a shared budget
 * weighs (issue 28 §1): an IPv4 address and its /24; an IPv6 address's /64, /56 and /48. Each is
 * named so that no two levels share a name. Anything else (no address at all) is its own network.
 */
export function addressPrefixes(ip: string): string[] {
  if (!ip.includes(':')) {
    if (!isIPv4(ip)) return [ip.slice(0, 64)];
    return [ip, `${ip.slice(0, ip.lastIndexOf('.'))}.0/24`];
  }
  const bare = ip.split('%', 1)[0]!;
  if (!isIPv6(bare)) return [ip.slice(0, 64)];
  const groups = expandIPv6(bare);
  if (groups.slice(0, 5).every((g) => g === 0) && groups[5] === 0xffff) {
    const v4 = `${groups[6]! >> 8}.${groups[6]! & 0xff}.${groups[7]! >> 8}`;
    return [`${v4}.${groups[7]! & 0xff}`, `${v4}.0/24`];
  }
  // As prefixKey would write them, without masking eight groups three times (this runs on every poll).
  const head = `${groups[0]!.toString(16)}:${groups[1]!.toString(16)}:${groups[2]!.toString(16)}`;
  return [`${head}:${groups[3]!.toString(16)}:0:0:0:0/64`, `${head}:${(groups[3]! & 0xff00).toString(16)}:0:0:0:0/56`, `${head}:0:0:0:0:0/48`];
}

/** An IPv6 address's first `prefix` bits, as `a:b:…:0/prefix`. */
function prefixKey(groups: readonly number[], prefix: number): string {
  const masked = groups.map((group, index) => {
    const bitsKept = Math.min(16, Math.max(0, prefix - index * 16));
    return bitsKept === 16 ? group : bitsKept === 0 ? 0 : group & ((0xffff << (16 - bitsKept)) & 0xffff);
  });
  return `${masked.map((g) => g.toString(16)).join(':')}/${prefix}`;
}

/** The eight 16-bit groups of a valid IPv6 address (with or without an IPv4 tail, :: anywhere). */
function expandIPv6(address: string): number[] {
  let text = address;
  const lastColon = text.lastIndexOf(':');
  const tail = text.slice(lastColon + 1);
  if (tail.includes('.')) {
    const [a, b, c, d] = tail.split('.').map(Number) as [number, number, number, number];
    text = `${text.slice(0, lastColon + 1)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, rest] = text.split('::') as [string, string | undefined];
  const parse = (part: string) => (part === '' ? [] : part.split(':').map((g) => parseInt(g, 16)));
  const left = parse(head);
  if (rest === undefined) return left;
  const right = parse(rest);
  return [...left, ...new Array<number>(8 - left.length - right.length).fill(0), ...right];
}
