import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import { type AddressRule, isPublicAddress } from './public-address.js';

/**
 * What every request the server makes to a stranger's URL shares (platform icons, webhooks,
 * Shared Signals push): the name is resolved once, every address it stands for must be public,
 * and the connection goes to that checked address, never to the name again.
 */

export interface ResolvedAddress {
  address: string;
  family: number;
}

/** Every address a host name stands for; an IP literal stands for itself. */
export type HostResolver = (hostname: string) => Promise<ResolvedAddress[]>;

export const resolveWithSystem: HostResolver = async (hostname) => {
  const family = isIP(hostname);
  if (family !== 0) return [{ address: hostname, family }];
  return lookup(hostname, { all: true, verbatim: true });
};

/** A URL's host as a resolver takes it: an IPv6 literal without its brackets. */
export function bareHostname(url: URL): string {
  return url.hostname.replace(/^\[(.*)\]$/, '$1');
}

/** Settles with `promise`, or rejects as soon as `signal` aborts (a DNS lookup cannot be cancelled). */
function untilAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}

/** Destroys `request` and rejects with the signal's reason as soon as `signal` aborts; true if it already has (send nothing). */
export function abortOnSignal(
  request: { destroy(): void; on(event: 'close', listener: () => void): unknown },
  signal: AbortSignal,
  reject: (reason: unknown) => void,
): boolean {
  const onAbort = () => {
    request.destroy();
    reject(signal.reason);
  };
  if (signal.aborted) {
    onAbort();
    return true;
  }
  signal.addEventListener('abort', onAbort, { once: true });
  request.on('close', () => signal.removeEventListener('abort', onAbort));
  return false;
}

/**
 * The one address to connect to, once every address the host stands for proved public under
 * `rule`: a name with one private address among public ones is refused (DNS rebinding, split
 * answers). Rejects only when `signal` aborts.
 */
export async function publicAddressOf(
  hostname: string,
  resolve: HostResolver,
  rule: AddressRule,
  signal: AbortSignal,
): Promise<ResolvedAddress | 'not_resolved' | 'not_public'> {
  let addresses: ResolvedAddress[];
  try {
    addresses = await untilAborted(resolve(hostname), signal);
  } catch (error) {
    if (signal.aborted) throw error;
    return 'not_resolved';
  }
  const first = addresses[0];
  if (!first) return 'not_resolved';
  if (!addresses.every(({ address }) => isPublicAddress(address, rule))) return 'not_public';
  return first;
}
