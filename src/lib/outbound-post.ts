import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { isIP } from 'node:net';
import { rootCertificates } from 'node:tls';
import { abortOnSignal, bareHostname, type HostResolver, publicAddressOf, type ResolvedAddress } from './outbound-address.js';
import { isLoopbackAddress, isPublicAddress } from './public-address.js';

/**
 * POSTs that leave the server for a URL an operator or an app registered (webhooks, Shared
 * Signals push), as safe as the icon fetcher: https only, every address the name stands for
 * public (checked at each request, the connection made to the checked address), bounded in time,
 * no redirect followed (a 3xx is an answer like any other), nothing read of the answer but its
 * status. EVENTS_ALLOW_LOOPBACK (`allowLoopback`) lets loopback stand for the Internet, and
 * allows plain http to loopback only: a test's receiver, or one on the operator's own machine.
 */

export interface OutboundPostOptions {
  resolve: HostResolver;
  allowLoopback: boolean;
  /** Fixed, naming the service. */
  userAgent: string;
  timeoutMs: number;
  /** Trust anchors besides Node's bundled ones: a test's own certificate authority. */
  extraCertificates?: readonly string[] | undefined;
  /** Ends the request early (shutdown). */
  signal?: AbortSignal | undefined;
}

export type OutboundRefusal = 'not_https' | 'credentials' | 'not_resolved' | 'not_public' | 'timeout' | 'connection_failed' | 'shutting_down';

export type OutboundAnswer = { status: number } | { refusal: OutboundRefusal };

const MAX_URL_LENGTH = 2000;

/**
 * Why a URL may not be registered as a receiver, or null. Literal addresses are judged here
 * (private, loopback, link-local, unique-local, IPv4-mapped forms: the URL parser has already
 * turned `0x7f.1` and `[::ffff:127.0.0.1]` into their plain forms); a name is judged by what it
 * resolves to, at every delivery.
 */
export function receiverUrlProblem(value: string, allowLoopback: boolean): string | null {
  if (value.length > MAX_URL_LENGTH) return `must be at most ${MAX_URL_LENGTH} characters`;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return 'must be an absolute URL';
  }
  const host = bareHostname(url);
  const literal = isIP(host) !== 0;
  const loopbackName = host === 'localhost' || host.endsWith('.localhost');
  if (url.protocol === 'http:') {
    if (!allowLoopback || !(loopbackName || (literal && isLoopbackAddress(host)))) return 'must be https';
  } else if (url.protocol !== 'https:') return 'must be https';
  if (url.username !== '' || url.password !== '') return 'must not carry credentials';
  if (url.hash !== '') return 'must not have a fragment';
  if (literal && !isPublicAddress(host, { allowLoopback })) return 'must not be a private, loopback, link-local or reserved address';
  if (loopbackName && !allowLoopback) return 'must not be a loopback name';
  return null;
}

function post(
  url: URL,
  to: ResolvedAddress,
  headers: Readonly<Record<string, string>>,
  body: Buffer,
  options: OutboundPostOptions,
  signal: AbortSignal,
): Promise<number> {
  const hostname = bareHostname(url);
  const https = url.protocol === 'https:';
  return new Promise<number>((resolve, reject) => {
    const common = {
      host: to.address,
      family: to.family,
      port: url.port === '' ? (https ? 443 : 80) : Number(url.port),
      path: `${url.pathname}${url.search}`,
      method: 'POST',
      // A connection of its own, never shared: no pooled socket, no credentials.
      agent: false as const,
      headers: { ...headers, host: url.host, 'user-agent': options.userAgent, 'content-length': String(body.length) },
    };
    const onResponse = (response: IncomingMessage) => {
      // Only the status counts: nothing of the answer is read or kept.
      resolve(response.statusCode ?? 0);
      response.destroy();
    };
    const request = https
      ? httpsRequest(
          {
            ...common,
            // The certificate is checked against the name in the URL, not the address (RFC 6066 §3: no SNI for an address).
            servername: isIP(hostname) === 0 ? hostname : '',
            ...(options.extraCertificates ? { ca: [...rootCertificates, ...options.extraCertificates] } : {}),
          },
          onResponse,
        )
      : httpRequest(common, onResponse);
    if (abortOnSignal(request, signal, reject)) return;
    request.on('error', reject);
    request.end(body);
  });
}

/** Sends one POST. Never throws: a refusal says why no status came back. */
export async function postOutbound(
  target: string,
  headers: Readonly<Record<string, string>>,
  body: string,
  options: OutboundPostOptions,
): Promise<OutboundAnswer> {
  const timeout = AbortSignal.timeout(options.timeoutMs);
  const signal = options.signal ? AbortSignal.any([timeout, options.signal]) : timeout;
  try {
    const url = new URL(target);
    const http = url.protocol === 'http:';
    if (!http && url.protocol !== 'https:') return { refusal: 'not_https' };
    if (url.username !== '' || url.password !== '') return { refusal: 'credentials' };
    const address = await publicAddressOf(bareHostname(url), options.resolve, { allowLoopback: options.allowLoopback }, signal);
    if (typeof address === 'string') return { refusal: address };
    // Plain http only to loopback, and only when loopback is allowed at all.
    if (http && !(options.allowLoopback && isLoopbackAddress(address.address))) return { refusal: 'not_https' };
    return { status: await post(url, address, headers, Buffer.from(body, 'utf8'), options, signal) };
  } catch {
    if (timeout.aborted) return { refusal: 'timeout' };
    if (signal.aborted) return { refusal: 'shutting_down' };
    return { refusal: 'connection_failed' };
  }
}
