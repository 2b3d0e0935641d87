import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { createServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { isIP } from 'node:net';
import { generate } from 'selfsigned';
import type { HostResolver } from '../../src/lib/outbound-address.js';

/**
 * A device's icon host on loopback, over https with a certificate of its own: stands for the
 * Internet in tests. Its names resolve only through `resolve`, never through DNS.
 */
export const ICON_HOST = 'icons.test';

/** A 1×1 PNG in the accent blue, shown at 48×48. */
export const ICON_PNG = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGPgDr8AAAGjATO977V+AAAAAElFTkSuQmCC', 'base64');

export type IconHandler = (request: IncomingMessage, response: ServerResponse) => void;

export interface ReceivedRequest {
  path: string;
  headers: IncomingHttpHeaders;
}

export interface IconServer {
  /** https://icons.test:PORT */
  origin: string;
  port: number;
  url(path: string, host?: string): string;
  /** Every request the server received, in order. */
  requests: ReceivedRequest[];
  /** What a path answers, whatever its query; any other path is 404. */
  route(path: string, handler: IconHandler): void;
  /** icons.test and the names given to `names` resolve as told; an IP literal is itself; anything else is unknown. */
  resolve: HostResolver;
  /** Further names for `resolve`, e.g. one that resolves to a private address, or differently each time. */
  names: Map<string, string[] | (() => string[])>;
  /** Every name `resolve` was asked for, in order. */
  resolutions: string[];
  /** The server's self-signed certificate, to be trusted by the fetcher under test. */
  certificate: string;
  close(): Promise<void>;
}

let certificate: Promise<{ cert: string; key: string }> | undefined;

/** One certificate per test process (generating a key takes a moment): icons.test, its subnames, 127.0.0.1. */
function testCertificate() {
  certificate ??= generate([{ name: 'commonName', value: ICON_HOST }], {
    keyType: 'ec',
    algorithm: 'sha256',
    extensions: [
      { name: 'basicConstraints', cA: true },
      { name: 'keyUsage', digitalSignature: true, keyCertSign: true },
      { name: 'extKeyUsage', serverAuth: true },
      {
        name: 'subjectAltName',
        altNames: [
          { type: 2, value: ICON_HOST },
          { type: 2, value: `*.${ICON_HOST}` },
          { type: 7, ip: '127.0.0.1' },
        ],
      },
    ],
  }).then((pems) => ({ cert: pems.cert, key: pems.private }));
  return certificate;
}

export const pngHandler: IconHandler = (_request, response) => {
  response.writeHead(200, { 'content-type': 'image/png', 'content-length': ICON_PNG.length }).end(ICON_PNG);
};

export function redirectTo(location: string, status = 302): IconHandler {
  return (_request, response) => response.writeHead(status, { location }).end();
}

export async function startIconServer(): Promise<IconServer> {
  const { cert, key } = await testCertificate();
  const routes = new Map<string, IconHandler>();
  const requests: ReceivedRequest[] = [];
  const server = createServer({ cert, key }, (request, response) => {
    const path = request.url ?? '/';
    requests.push({ path, headers: request.headers });
    const handler = routes.get(path.split('?')[0] ?? path);
    if (handler) handler(request, response);
    else response.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  const names = new Map<string, string[] | (() => string[])>([[ICON_HOST, ['127.0.0.1']]]);
  const resolutions: string[] = [];
  return {
    origin: `https://${ICON_HOST}:${port}`,
    port,
    url: (path, host = ICON_HOST) => `https://${host}:${port}${path}`,
    requests,
    route: (path, handler) => void routes.set(path, handler),
    names,
    resolutions,
    async resolve(hostname) {
      resolutions.push(hostname);
      const family = isIP(hostname);
      if (family !== 0) return [{ address: hostname, family }];
      const answer = names.get(hostname);
      if (!answer) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
      return (typeof answer === 'function' ? answer() : answer).map((address) => ({ address, family: isIP(address) }));
    },
    certificate: cert,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** What an icon server's tests pass to startTestApp: loopback allowed, its names and certificate. */
export function fetchingFrom(server: IconServer) {
  return {
    env: { ICON_FETCH_ALLOW_LOOPBACK: 'true' },
    iconFetching: { resolve: server.resolve, extraCertificates: [server.certificate] },
  };
}
