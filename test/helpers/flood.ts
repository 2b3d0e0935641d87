import { randomInt } from 'node:crypto';

const hex = (n: number) => n.toString(16);

/** `count` distinct random integers below `below`. */
function distinct(count: number, below: number): number[] {
  const picked = new Set<number>();
  for (let tries = 0; picked.size < count && tries < count * 100; tries++) picked.add(randomInt(below));
  return [...picked];
}

/**
 * Source addresses of a distributed flood, spread as issue 28 §1 describes an attacker with a
 * few networks: 40 /64s of one IPv6 /56, then /64s in many /48s (two in each), then IPv4
 * addresses, twenty to a /24. Fresh random prefixes on every call (2001:db8::/32 and 10/8), so
 * that counters from earlier runs never meet them. Tests reach the app through
 * TRUST_PROXY=127.0.0.1 and X-Forwarded-For.
 */
export function floodAddresses(count: number): string[] {
  const inSite = Math.min(40, count);
  const inBlocks = Math.floor((count - inSite) / 2);
  const inV4 = count - inSite - inBlocks;
  const blocks48 = distinct(1 + Math.ceil(inBlocks / 2), 65536);
  const blocks24 = distinct(Math.ceil(inV4 / 20), 65536);
  const site = `2001:db8:${hex(blocks48[0]!)}:${hex(randomInt(256) << 8)}`;
  const addresses: string[] = [];
  for (let i = 0; i < inSite; i++) addresses.push(`${site.slice(0, -2)}${hex(0x100 + i).slice(1)}::${hex(randomInt(1, 65536))}`);
  for (let i = 0; i < inBlocks; i++) addresses.push(`2001:db8:${hex(blocks48[1 + (i >> 1)]!)}:${hex((i & 1) + 1)}::${hex(randomInt(1, 65536))}`);
  for (let i = 0; i < inV4; i++) {
    const block = blocks24[Math.floor(i / 20)]!;
    addresses.push(`10.${block >> 8}.${block & 0xff}.${(i % 20) + 1}`);
  }
  return addresses;
}

/** A legitimate client's address, in prefixes no flood uses (172.16/12, fd00::/8). */
export function legitAddress(family: 4 | 6 = 4): string {
  return family === 4
    ? `172.${16 + randomInt(16)}.${randomInt(256)}.${randomInt(1, 255)}`
    : `fd${hex(randomInt(256)).padStart(2, '0')}:${hex(randomInt(65536))}:${hex(randomInt(65536))}:${hex(randomInt(65536))}::1`;
}

/** Milliseconds taken by `request`, with its result. */
export async function timed<T>(request: () => Promise<T>): Promise<{ result: T; ms: number }> {
  const started = performance.now();
  const result = await request();
  return { result, ms: performance.now() - started };
}

/**
 * Sends `requests` with at most `inFlight` at once, in order, and returns every answer in that
 * order: a steady flood, as a client with that many connections sends it, rather than a queue of
 * thousands that says more about the test machine than about the server.
 */
export async function sendAll<T>(requests: ReadonlyArray<() => Promise<T>>, inFlight = 25): Promise<T[]> {
  const answers: T[] = new Array(requests.length);
  let next = 0;
  const worker = async () => {
    while (next < requests.length) {
      const index = next++;
      answers[index] = await requests[index]!();
    }
  };
  await Promise.all(Array.from({ length: Math.min(inFlight, requests.length) }, worker));
  return answers;
}
