import * as client from 'openid-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { seedClient, seedUser, startTestApp, type TestApp } from '../helpers/app.js';
import { decide } from '../helpers/device.js';
import { freePort } from '../helpers/server-process.js';

/**
 * Issue 22 §2: openid-client's DPoP support (RFC 9449) against the server, configured from
 * discovery alone: the device flow whose first proof comes with the poll, a refresh, userinfo; with
 * server nonces off and on (openid-client learns a nonce from use_dpop_nonce and retries once).
 */

describe.each([
  { nonces: false, name: 'without server nonces' },
  { nonces: true, name: 'with server nonces (DPOP_NONCES=true)' },
])('openid-client with DPoP, $name', ({ nonces }) => {
  let t: TestApp;
  let config: client.Configuration;
  let user: { userId: string };

  beforeAll(async () => {
    const port = await freePort();
    const issuer = `http://127.0.0.1:${port}`;
    t = await startTestApp({ realTime: true, env: { DEVICE_POLL_INTERVAL: '1', ISSUER: issuer, DPOP_NONCES: String(nonces) } });
    await t.app.listen({ port, host: '127.0.0.1' });
    user = await seedUser(t);
    const app = await seedClient(t, { kind: 'tv', name: 'openid-client DPoP tv' });
    config = await client.discovery(new URL(issuer), app.clientId, undefined, client.None(), { execute: [client.allowInsecureRequests] });
  });
  afterAll(() => t?.close());

  it('runs the device flow, a refresh and userinfo with DPoP-bound tokens', async () => {
    expect(config.serverMetadata().dpop_signing_alg_values_supported).toContain('ES256');
    const DPoP = client.getDPoPHandle(config, await client.randomDPoPKeyPair('ES256'));
    const device = await client.initiateDeviceAuthorization(config, { scope: 'openid profile offline_access' });
    expect(await decide(t, device.user_code, user.userId, 'approve')).toBe('approved');
    const tokens = await client.pollDeviceAuthorizationGrant(config, device, undefined, { DPoP, signal: AbortSignal.timeout(20_000) });
    expect(tokens.token_type).toBe('dpop');

    const claims = await client.fetchUserInfo(config, tokens.access_token, user.userId, { DPoP });
    expect(claims.sub).toBe(user.userId);

    const refreshed = await client.refreshTokenGrant(config, tokens.refresh_token!, undefined, { DPoP });
    expect(refreshed.token_type).toBe('dpop');
    expect((await client.fetchUserInfo(config, refreshed.access_token, user.userId, { DPoP })).sub).toBe(user.userId);

    // Another key cannot refresh the chain, and the chain survives the attempt.
    const stranger = client.getDPoPHandle(config, await client.randomDPoPKeyPair('ES256'));
    await expect(client.refreshTokenGrant(config, refreshed.refresh_token!, undefined, { DPoP: stranger })).rejects.toMatchObject({
      error: 'invalid_dpop_proof',
    });
    expect((await client.refreshTokenGrant(config, refreshed.refresh_token!, undefined, { DPoP })).token_type).toBe('dpop');
  });

  it('an EdDSA key works the same', async () => {
    const DPoP = client.getDPoPHandle(config, await client.randomDPoPKeyPair('EdDSA'));
    const device = await client.initiateDeviceAuthorization(config, { scope: 'openid' });
    await decide(t, device.user_code, user.userId, 'approve');
    const tokens = await client.pollDeviceAuthorizationGrant(config, device, undefined, { DPoP, signal: AbortSignal.timeout(20_000) });
    expect((await client.fetchUserInfo(config, tokens.access_token, user.userId, { DPoP })).sub).toBe(user.userId);
  });
});
