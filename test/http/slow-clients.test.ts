import { connect, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.js';

/**
 * Issue 28 §2: 300 connections that sent their headers and then stalled held their sockets for
 * ever, and a real request got no answer. Every socket now has header, request and idle timeouts,
 * and their number is capped.
 */

const STALLED_POST =
  'POST /oauth/token HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 1000\r\n\r\ngrant_type=';

/** A socket to the app that has sent `bytes` and then nothing; resolves once connected. */
function stalledConnection(port: number, bytes: string): Promise<{ socket: Socket; closed: Promise<number> }> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port }, () => {
      socket.write(bytes);
      resolve({ socket, closed });
    });
    const closed = new Promise<number>((done) => socket.once('close', () => done(Date.now())));
    // Read whatever comes (a 408), so that the server's end of the connection is seen.
    socket.resume();
    socket.on('error', () => {});
    socket.once('error', reject);
  });
}

async function listen(t: TestApp): Promise<number> {
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  return (t.app.server.address() as AddressInfo).port;
}

describe('connection limits are set by default', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp();
  });
  afterAll(() => t.close());

  it('a request must arrive within 30 s (headers within 10 s), keep-alive is bounded and connections capped', () => {
    const server = t.app.server;
    expect(server.headersTimeout).toBe(10_000);
    expect(server.requestTimeout).toBe(30_000);
    // A stalled body is cut off within 60 s whatever the checking interval.
    expect(server.requestTimeout + 1000).toBeLessThanOrEqual(60_000);
    // No per-socket idle timer (fastify's connectionTimeout): it cost 20-40 µs of CPU on every
    // request (docs/benchmarks.md); between requests the keep-alive timeout closes an idle socket.
    expect(server.timeout).toBe(0);
    expect(server.keepAliveTimeout).toBe(65_000);
    expect(server.maxRequestsPerSocket).toBe(1000);
    expect(server.maxConnections).toBe(4096);
  });
});

describe('stalled clients are cut off (HTTP_REQUEST_TIMEOUT=2, HTTP_HEADERS_TIMEOUT=1)', () => {
  let t: TestApp;
  let port: number;
  beforeAll(async () => {
    t = await startTestApp({ env: { HTTP_REQUEST_TIMEOUT: '2', HTTP_HEADERS_TIMEOUT: '1' } });
    port = await listen(t);
  });
  afterAll(() => t.close());

  it('a body that stalls after the headers is cut off within the request timeout, with 408', async () => {
    const started = Date.now();
    const { socket, closed } = await stalledConnection(port, STALLED_POST);
    let answer = '';
    socket.prependListener('data', (chunk: Buffer) => (answer += chunk.toString('latin1')));
    const at = await closed;
    expect(at - started).toBeGreaterThanOrEqual(1500);
    expect(at - started).toBeLessThan(5000);
    expect(answer).toMatch(/^HTTP\/1\.1 408 /);
  });

  it('headers that stall half-way are cut off within the header timeout', async () => {
    const started = Date.now();
    const { closed } = await stalledConnection(port, 'GET /healthz HTTP/1.1\r\nHost: localh');
    expect((await closed) - started).toBeLessThan(3000);
  });

  it('while 300 stalled connections are held, a real request is answered at once; then every one of them is closed', async () => {
    const stalled = await Promise.all(Array.from({ length: 300 }, () => stalledConnection(port, STALLED_POST)));
    const started = Date.now();
    const res = await fetch(`http://127.0.0.1:${port}/healthz`, { signal: AbortSignal.timeout(2000) });
    expect(res.status).toBe(200);
    expect(Date.now() - started).toBeLessThan(2000);
    const closedAt = await Promise.all(stalled.map((s) => s.closed));
    expect(Math.max(...closedAt) - started).toBeLessThan(6000);
  }, 20_000);
});

describe('the connection cap (HTTP_MAX_CONNECTIONS=20)', () => {
  let t: TestApp;
  let port: number;
  beforeAll(async () => {
    t = await startTestApp({ env: { HTTP_MAX_CONNECTIONS: '20', HTTP_REQUEST_TIMEOUT: '2', HTTP_HEADERS_TIMEOUT: '1' } });
    port = await listen(t);
  });
  afterAll(() => t.close());

  it('connections past the cap are closed at once; once the stalled ones time out, requests are answered again', async () => {
    const held = await Promise.all(Array.from({ length: 20 }, () => stalledConnection(port, STALLED_POST)));
    // Give the server the moment to count them.
    await new Promise((resolve) => setTimeout(resolve, 100));
    const started = Date.now();
    const extra = await stalledConnection(port, STALLED_POST);
    expect((await extra.closed) - started).toBeLessThan(1000);
    await Promise.all(held.map((s) => s.closed));
    const res = await fetch(`http://127.0.0.1:${port}/healthz`, { signal: AbortSignal.timeout(2000) });
    expect(res.status).toBe(200);
  }, 20_000);
});
