import { request as httpsRequest } from 'node:https';
import { isIP } from 'node:net';
import { rootCertificates } from 'node:tls';
import { abortOnSignal, bareHostname, type HostResolver, publicAddressOf, type ResolvedAddress } from '../../lib/outbound-address.js';
import type { AddressRule } from '../../lib/public-address.js';

/** Issue 20 §4: what the server agrees to fetch for a device it knows nothing about. */
export const ICON_MAX_BYTES = 64 * 1024;
const ICON_FETCH_TIMEOUT_MS = 2000;
const ICON_MAX_REDIRECTS = 3;

/**
 * Raster formats only: an SVG is a document that can carry script and links, and would be one
 * more thing to sanitise. ICO is stored under the type every browser knows it by.
 */
export type IconContentType = 'image/png' | 'image/jpeg' | 'image/gif' | 'image/webp' | 'image/x-icon';

const DECLARED_TYPES: Record<string, IconContentType> = {
  'image/png': 'image/png',
  'image/jpeg': 'image/jpeg',
  'image/jpg': 'image/jpeg',
  'image/pjpeg': 'image/jpeg',
  'image/gif': 'image/gif',
  'image/webp': 'image/webp',
  'image/x-icon': 'image/x-icon',
  'image/vnd.microsoft.icon': 'image/x-icon',
};

const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

/** What the bytes are, by their magic numbers, whatever the header says. */
function sniffIconType(bytes: Buffer): IconContentType | null {
  const ascii = (from: number, to: number) => bytes.subarray(from, to).toString('latin1');
  if (bytes.subarray(0, 8).equals(PNG_SIGNATURE)) return 'image/png';
  if (bytes[0] === 0xff && bytes[1] === 0xd8 && bytes[2] === 0xff) return 'image/jpeg';
  if (ascii(0, 6) === 'GIF87a' || ascii(0, 6) === 'GIF89a') return 'image/gif';
  if (ascii(0, 4) === 'RIFF' && ascii(8, 12) === 'WEBP') return 'image/webp';
  // ICONDIR: reserved 0, type 1 (icon), then a non-zero image count.
  if (bytes.length >= 6 && bytes.readUInt32BE(0) === 0x00000100 && bytes.readUInt16LE(4) > 0) return 'image/x-icon';
  return null;
}

function declaredType(header: string | undefined): IconContentType | null {
  const mediaType = (header ?? '').split(';')[0]?.trim().toLowerCase() ?? '';
  return DECLARED_TYPES[mediaType] ?? null;
}

export type IconRefusal =
  | 'not_https'
  | 'credentials'
  | 'not_resolved'
  | 'not_public'
  | 'bad_redirect'
  | 'too_many_redirects'
  | 'http_status'
  | 'not_an_image'
  | 'too_large'
  | 'timeout'
  | 'connection_failed'
  | 'shutting_down';

export type FetchedIcon = { ok: true; contentType: IconContentType; bytes: Buffer } | { ok: false; refusal: IconRefusal };

export interface IconFetchOptions {
  resolve: HostResolver;
  addressRule: AddressRule;
  /** Fixed, naming the service: an icon host sees who fetches, and nothing of the user. */
  userAgent: string;
  /** Trust anchors besides Node's bundled ones: a test's own certificate authority. */
  extraCertificates?: readonly string[] | undefined;
  /** Ends the fetch early (shutdown). */
  signal?: AbortSignal | undefined;
}

class Refused extends Error {
  constructor(readonly refusal: IconRefusal) {
    super(refusal);
  }
}

const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308]);
const ACCEPT = Object.keys(DECLARED_TYPES).join(', ');

/**
 * The one address this hop connects to, after every address the name stands for proved public.
 * The connection then goes to that address, never to the name again: a second lookup could be
 * answered differently (DNS rebinding).
 */
async function checkedAddress(url: URL, options: IconFetchOptions, signal: AbortSignal): Promise<ResolvedAddress> {
  if (url.protocol !== 'https:') throw new Refused('not_https');
  if (url.username !== '' || url.password !== '') throw new Refused('credentials');
  const checked = await publicAddressOf(bareHostname(url), options.resolve, options.addressRule, signal);
  if (typeof checked === 'string') throw new Refused(checked);
  return checked;
}

type Hop = { kind: 'redirect'; location: URL } | { kind: 'image'; contentType: IconContentType; bytes: Buffer };

function fetchHop(url: URL, to: ResolvedAddress, options: IconFetchOptions, signal: AbortSignal): Promise<Hop> {
  const hostname = bareHostname(url);
  return new Promise<Hop>((resolve, reject) => {
    const request = httpsRequest(
      {
        host: to.address,
        family: to.family,
        port: url.port === '' ? 443 : Number(url.port),
        path: `${url.pathname}${url.search}`,
        method: 'GET',
        // The certificate is checked against the name in the URL (SNI too), not the address.
        // RFC 6066 §3: no SNI for an address; the certificate is then checked against it.
        servername: isIP(hostname) === 0 ? hostname : '',
        ...(options.extraCertificates ? { ca: [...rootCertificates, ...options.extraCertificates] } : {}),
        // A connection of its own, never shared: no cookie jar, no credentials, no pooled socket.
        agent: false,
        headers: { host: url.host, 'user-agent': options.userAgent, accept: ACCEPT, 'accept-encoding': 'identity' },
      },
      (response) => {
        const fail = (refusal: IconRefusal) => {
          response.destroy();
          reject(new Refused(refusal));
        };
        const status = response.statusCode ?? 0;
        if (REDIRECT_STATUSES.has(status)) {
          const location = response.headers.location;
          response.destroy();
          if (location === undefined) return reject(new Refused('bad_redirect'));
          try {
            return resolve({ kind: 'redirect', location: new URL(location, url) });
          } catch {
            return reject(new Refused('bad_redirect'));
          }
        }
        if (status !== 200) return fail('http_status');
        const encoding = response.headers['content-encoding'];
        if (encoding !== undefined && encoding.toLowerCase() !== 'identity') return fail('not_an_image');
        const declared = declaredType(response.headers['content-type']);
        if (!declared) return fail('not_an_image');
        if (Number(response.headers['content-length'] ?? 0) > ICON_MAX_BYTES) return fail('too_large');
        const chunks: Buffer[] = [];
        let size = 0;
        response.on('data', (chunk: Buffer) => {
          size += chunk.length;
          // Stop reading at once: whatever follows is never buffered.
          if (size > ICON_MAX_BYTES) return fail('too_large');
          chunks.push(chunk);
        });
        response.on('end', () => {
          const bytes = Buffer.concat(chunks);
          // The header and the bytes must agree: a PNG header on an HTML page is not an image.
          if (sniffIconType(bytes) !== declared) return reject(new Refused('not_an_image'));
          resolve({ kind: 'image', contentType: declared, bytes });
        });
        response.on('error', reject);
      },
    );
    if (abortOnSignal(request, signal, reject)) return;
    request.on('error', reject);
    request.end();
  });
}

/**
 * Fetches a device's platform icon as the server, never as the user: https only, public
 * addresses only (checked again at every redirect, at most three), two seconds in all, at most
 * 64 KB, raster images only. Never throws: a refusal says why.
 */
export async function fetchIcon(url: string, options: IconFetchOptions): Promise<FetchedIcon> {
  const timeout = AbortSignal.timeout(ICON_FETCH_TIMEOUT_MS);
  const signal = options.signal ? AbortSignal.any([timeout, options.signal]) : timeout;
  try {
    let current = new URL(url);
    for (let hop = 0; hop <= ICON_MAX_REDIRECTS; hop++) {
      const address = await checkedAddress(current, options, signal);
      const answer = await fetchHop(current, address, options, signal);
      if (answer.kind === 'image') return { ok: true, contentType: answer.contentType, bytes: answer.bytes };
      current = answer.location;
    }
    return { ok: false, refusal: 'too_many_redirects' };
  } catch (error) {
    if (error instanceof Refused) return { ok: false, refusal: error.refusal };
    if (timeout.aborted) return { ok: false, refusal: 'timeout' };
    if (signal.aborted) return { ok: false, refusal: 'shutting_down' };
    return { ok: false, refusal: 'connection_failed' };
  }
}
