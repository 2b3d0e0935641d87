import { request as httpRequest, createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { decodeProtectedHeader } from 'jose';
import { sql } from 'kysely';
import * as client from 'openid-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { seedClient, seedUser, startTestApp, type TestApp } from '../helpers/app.js';
import { decide } from '../helpers/device.js';
import { freePort } from '../helpers/server-process.js';

/**
 * Issue 22 §3: openid-client (panva), configured from discovery alone, verifies every ID token
 * across a key rotation while its requests are spread over two instances on one database, as a
 * load balancer would. Its JWKS cache, fetched before the rotation, already holds the key that
 * signs after it: the key was published ahead.
 */

let a: TestApp;
let b: TestApp;
let proxy: Server;
let issuer: string;
/** Which instance answered each request to the token endpoint. */
const tokenRequests: string[] = [];

/** Round robin over the two instances, request by request. */
function roundRobin(backends: { name: string; port: number }[]): Server {
  let turn = 0;
  return createServer((incoming, outgoing) => {
    const backend = backends[turn++ % backends.length]!;
    if (incoming.url?.startsWith('/oauth/token')) tokenRequests.push(backend.name);
    const forwarded = httpRequest(
      { host: '127.0.0.1', port: backend.port, method: incoming.method, path: incoming.url, headers: incoming.headers },
      (answer) => {
        outgoing.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(outgoing);
      },
    );
    forwarded.on('error', () => outgoing.destroy());
    incoming.pipe(forwarded);
  });
}

beforeAll(async () => {
  const port = await freePort();
  issuer = `http://127.0.0.1:${port}`;
  const env = { ISSUER: issuer, DEVICE_POLL_INTERVAL: '1' };
  a = await startTestApp({ realTime: true, env });
  b = await startTestApp({ realTime: true, env, database: a.database });
  await a.app.listen({ port: 0, host: '127.0.0.1' });
  await b.app.listen({ port: 0, host: '127.0.0.1' });
  proxy = roundRobin([
    { name: 'a', port: (a.app.server.address() as AddressInfo).port },
    { name: 'b', port: (b.app.server.address() as AddressInfo).port },
  ]);
  await new Promise<void>((resolve) => proxy.listen(port, '127.0.0.1', resolve));
});
afterAll(async () => {
  await new Promise((resolve) => proxy.close(resolve));
  await b.close();
  await a.close();
});

/** Waits, boundedly, until `t` has reloaded its keys since `before`. */
async function reloadedSince(t: TestApp, before: number) {
  const started = Date.now();
  for (let turn = 0; turn < 1000 && t.deps.keys.reloads === before; turn++) {
    if (Date.now() - started > 5_000) throw new Error('no reload within 5 s');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

describe('openid-client across a key rotation, two instances', () => {
  it('verifies ID tokens signed before and after the rotation by either instance', async () => {
    const tv = await seedClient(a, { kind: 'tv' });
    const user = await seedUser(a);
    const config = await client.discovery(new URL(issuer), tv.clientId, undefined, client.None(), {
      execute: [client.allowInsecureRequests, client.enableNonRepudiationChecks],
    });
    const device = await client.initiateDeviceAuthorization(config, { scope: 'openid profile offline_access' });
    expect(await decide(a, device.user_code, user.userId, 'approve')).toBe('approved');
    const first = await client.pollDeviceAuthorizationGrant(config, device, undefined, { signal: AbortSignal.timeout(20_000) });
    const before = decodeProtectedHeader(first.id_token!).kid!;
    expect(first.claims()?.sub).toBe(user.userId);
    const cached = client.getJwksCache(config)!.jwks.keys.map((k) => k.kid);
    const next = cached.find((kid) => kid !== before)!;
    expect(next).toBeDefined();

    // The next key has been published for an hour: a rotation now switches at once, on both.
    const heardBefore = b.deps.keys.reloads;
    await sql`UPDATE signing_keys SET created_at = created_at - interval '1 hour' WHERE activates_at IS NULL`.execute(a.deps.db);
    const schedule = await a.deps.keys.maintain(true);
    expect(schedule.active).toBe(next);
    await reloadedSince(b, heardBefore);

    tokenRequests.length = 0;
    let refreshToken = first.refresh_token!;
    const kids: string[] = [];
    for (let i = 0; i < 4; i++) {
      const tokens = await client.refreshTokenGrant(config, refreshToken);
      refreshToken = tokens.refresh_token!;
      expect(tokens.claims()?.sub).toBe(user.userId);
      kids.push(decodeProtectedHeader(tokens.id_token!).kid!);
    }
    expect(new Set(tokenRequests)).toEqual(new Set(['a', 'b']));
    expect(new Set(kids)).toEqual(new Set([next]));
    // No refetch was needed: the cache from before the rotation held the new key.
    expect(client.getJwksCache(config)!.jwks.keys.map((k) => k.kid)).toEqual(cached);
  });
});
