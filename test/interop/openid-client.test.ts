import * as client from 'openid-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { userCodeHmac } from '../../src/oauth/device/user-code.js';
import { basicAuth, seedClient, seedUser, startTestApp, type TestApp } from '../helpers/app.js';
import { inputValue, phraseChoices, signedInBrowser, type Browser } from '../helpers/browser.js';
import { freePort } from '../helpers/server-process.js';

/**
 * Issue 4 §1: the whole life of a grant driven by openid-client (panva), configured from the
 * discovery document and nothing else. The only concession is plain http on loopback
 * (allowInsecureRequests); enableNonRepudiationChecks makes the client stricter, not looser:
 * it verifies every ID token's signature against the jwks_uri of the discovery document.
 * Whatever openid-client rejects is a bug in the server.
 */

const SCOPE = 'openid profile email offline_access';
const INTERVAL = 2;

let t: TestApp;
let issuer: string;
let user: { userId: string; email: string; password: string };
let browser: Browser;
/** OpenID Connect Core §2: auth_time is when the user signed in on the browser, not when they approved. */
let signedIn: { from: number; to: number };
let resourceServer: client.Configuration;

function configure(clientId: string, secret: string | null): Promise<client.Configuration> {
  return client.discovery(new URL(issuer), clientId, undefined, secret === null ? client.None() : client.ClientSecretBasic(secret), {
    execute: [client.allowInsecureRequests, client.enableNonRepudiationChecks],
  });
}

beforeAll(async () => {
  const port = await freePort();
  issuer = `http://127.0.0.1:${port}`;
  // openid-client follows the discovery document, so the issuer must be where the server listens.
  // A 2 s interval: short, yet a slow machine still makes the test's deliberate early poll in time.
  t = await startTestApp({ realTime: true, env: { DEVICE_POLL_INTERVAL: `${INTERVAL}`, ISSUER: issuer } });
  await t.app.listen({ port, host: '127.0.0.1' });
  user = await seedUser(t);
  const from = Math.floor(Date.now() / 1000);
  browser = await signedInBrowser(t, user);
  signedIn = { from, to: Math.ceil(Date.now() / 1000) };
  const rs = await seedClient(t, { kind: 'web', type: 'confidential', name: 'Photo API' });
  resourceServer = await configure(rs.clientId, rs.clientSecret);
});
afterAll(() => t.close());

/** The user decides on the server's own pages, reached through verification_uri_complete. */
async function decideOnPages(device: client.DeviceAuthorizationResponse, action: 'approve' | 'deny') {
  const complete = new URL(String(device.verification_uri_complete));
  expect(complete.origin).toBe(issuer);
  const codeStep = await browser.get(`${complete.pathname}${complete.search}`);
  expect(codeStep.statusCode, codeStep.body).toBe(200);
  expect(inputValue(codeStep.body, 'user_code')).toBe(device.user_code);
  const approval = await browser.post(complete.pathname, { user_code: device.user_code });
  expect(approval.statusCode, approval.body).toBe(200);
  // The user picks the phrase the device shows.
  const phrase = String(device.confirmation_phrase);
  expect(phraseChoices(approval.body)).toContain(phrase);
  const result = await browser.post(`${complete.pathname}/decision`, {
    user_code: inputValue(approval.body, 'user_code'),
    request_handle: inputValue(approval.body, 'request_handle'),
    action,
    phrase: action === 'approve' ? phrase : undefined,
  });
  expect(result.statusCode, result.body).toBe(200);
  expect(result.body).toContain(action === 'approve' ? 'is now connected to your account.' : 'Nothing was connected');
}

async function storedInterval(userCode: string): Promise<number> {
  const row = await t.deps.db
    .selectFrom('device_requests')
    .select('interval_seconds')
    .where('user_code_hmac', '=', userCodeHmac(t.deps.secrets.userCodeKey, userCode))
    .executeTakeFirstOrThrow();
  return row.interval_seconds;
}

/** Waits, boundedly, until `condition` holds. */
async function until(condition: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

interface App {
  name: string;
  kind: 'tv' | 'bot';
  type: 'public' | 'confidential';
  page: string;
}

describe.concurrent.each<App>([
  { name: 'public tv app', kind: 'tv', type: 'public', page: '/activate' },
  { name: 'confidential bot app', kind: 'bot', type: 'confidential', page: '/activate/bot' },
])('openid-client drives the $name', ({ kind, type, page }) => {
  let app: { clientId: string; clientSecret: string | null };
  let config: client.Configuration;

  beforeAll(async () => {
    app = await seedClient(t, { kind, type, name: `openid-client ${kind}` });
    config = await configure(app.clientId, app.clientSecret);
  });

  /** How this app authenticates a request made by hand, as openid-client would. */
  const authentication = (): { headers: Record<string, string>; fields: Record<string, string> } =>
    app.clientSecret === null
      ? { headers: {}, fields: { client_id: app.clientId } }
      : { headers: { authorization: basicAuth(app.clientId, app.clientSecret) }, fields: {} };

  /** One poll made by hand, right after the code was issued: sooner than the interval allows. */
  async function pollTooSoon(deviceCode: string) {
    const { headers, fields } = authentication();
    const res = await fetch(config.serverMetadata().token_endpoint!, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
      body: new URLSearchParams({ grant_type: 'urn:ietf:params:oauth:grant-type:device_code', device_code: deviceCode, ...fields }),
    });
    return { status: res.status, body: (await res.json()) as { error?: string } };
  }

  /** The device flow through openid-client, approved on the pages while it polls. */
  async function signIn() {
    const device = await client.initiateDeviceAuthorization(config, { scope: SCOPE, platform_name: 'openid-client' });
    const tokens = client.pollDeviceAuthorizationGrant(config, device, undefined, { signal: AbortSignal.timeout(20_000) });
    await decideOnPages(device, 'approve');
    return tokens;
  }

  function expectIdToken(tokens: client.TokenEndpointResponse & client.TokenEndpointResponseHelpers) {
    const claims = tokens.claims();
    expect(claims).toBeDefined();
    expect(claims!.iss).toBe(issuer);
    expect(claims!.aud).toBe(app.clientId);
    expect(claims!.sub).toBe(user.userId);
    expect(claims!.auth_time).toBeGreaterThanOrEqual(signedIn.from);
    expect(claims!.auth_time).toBeLessThanOrEqual(signedIn.to);
    expect(claims!.email).toBe(user.email);
    expect(claims!.name).toBe('Test User');
  }

  it('discovery, device authorization, polling through a slow_down, and an ID token checked against the JWKS', async () => {
    const metadata = config.serverMetadata();
    expect(metadata.issuer).toBe(issuer);
    expect(metadata.device_authorization_endpoint).toBe(`${issuer}/oauth/device/code`);

    const device = await client.initiateDeviceAuthorization(config, { scope: SCOPE, platform_name: 'openid-client' });
    expect(device.verification_uri).toBe(`${issuer}${page}`);
    expect(device.interval).toBe(INTERVAL);

    // RFC 8628 §3.5: a poll sooner than the interval is slowed down, and the interval grows by 5 s.
    const early = await pollTooSoon(device.device_code);
    expect(early).toEqual({ status: 400, body: expect.objectContaining({ error: 'slow_down' }) });
    expect(await storedInterval(device.user_code)).toBe(INTERVAL + 5);

    // openid-client waits the 2 s it was told and polls: too soon after the poll above, so it meets
    // a slow_down of its own (the stored interval grows again), adds 5 s and keeps polling. The user
    // approves only after that: slow_down is a variant of authorization_pending, so an approved
    // request answers with the tokens however soon it is polled.
    const handedOver = Date.now();
    const polling = client.pollDeviceAuthorizationGrant(config, device, undefined, { signal: AbortSignal.timeout(25_000) });
    await until(async () => (await storedInterval(device.user_code)) === INTERVAL + 10, 10_000);
    await decideOnPages(device, 'approve');
    const tokens = await polling;
    // 2 s, then 2 + 5 s: the client slowed down rather than giving up or hammering.
    expect(Date.now() - handedOver).toBeGreaterThanOrEqual((INTERVAL + INTERVAL + 5) * 1000 - 100);
    expect(await storedInterval(device.user_code)).toBe(INTERVAL + 10);

    expect(tokens.token_type).toBe('bearer');
    expect(tokens.access_token).toMatch(/^da_at_/);
    expect(tokens.refresh_token).toMatch(/^da_rt_/);
    expect(tokens.scope).toBe(SCOPE);
    expect(tokens.expiresIn()).toBeGreaterThan(0);
    expectIdToken(tokens);
    // The ID token's signature was checked with a key fetched from the discovered jwks_uri.
    expect(client.getJwksCache(config)?.jwks.keys.map((key) => key.kid)).toContain(t.deps.keys.signingKey().kid);
  });

  it('a denial on the pages ends the polling with access_denied', async () => {
    const device = await client.initiateDeviceAuthorization(config, { scope: SCOPE });
    const polling = client.pollDeviceAuthorizationGrant(config, device, undefined, { signal: AbortSignal.timeout(20_000) });
    const settled = polling.catch((error: unknown) => error);
    await decideOnPages(device, 'deny');
    const error = await settled;
    expect(error).toBeInstanceOf(client.ResponseBodyError);
    expect(error).toMatchObject({ error: 'access_denied', status: 400 });
  });

  it('refreshTokenGrant rotates the refresh token; a retry gets the same answer; the old one after the successor was used is invalid_grant and the grant is revoked', async () => {
    const first = await signIn();
    expectIdToken(first);

    const second = await client.refreshTokenGrant(config, first.refresh_token!);
    expect(second.refresh_token).toMatch(/^da_rt_/);
    expect(second.refresh_token).not.toBe(first.refresh_token);
    expect(second.access_token).not.toBe(first.access_token);
    // OpenID Connect Core §12.2: the refreshed ID token is about the same sign-in.
    expectIdToken(second);
    expect(second.claims()!.auth_time).toBe(first.claims()!.auth_time);

    // As if the answer had been lost: the same tokens again, and an ID token openid-client accepts.
    const retried = await client.refreshTokenGrant(config, first.refresh_token!);
    expect([retried.refresh_token, retried.access_token]).toEqual([second.refresh_token, second.access_token]);
    expectIdToken(retried);

    const third = await client.refreshTokenGrant(config, second.refresh_token!);
    const replay = client.refreshTokenGrant(config, first.refresh_token!);
    await expect(replay).rejects.toBeInstanceOf(client.ResponseBodyError);
    await expect(replay).rejects.toMatchObject({ error: 'invalid_grant', status: 400 });

    // The replay revoked the whole grant, the successor's tokens included.
    await expect(client.refreshTokenGrant(config, third.refresh_token!)).rejects.toMatchObject({ error: 'invalid_grant' });
    expect(await client.tokenIntrospection(resourceServer, third.access_token)).toEqual({ active: false });
  });

  it('tokenIntrospection and fetchUserInfo accept the access token until tokenRevocation, then refuse it', async () => {
    const tokens = await signIn();

    const introspected = await client.tokenIntrospection(resourceServer, tokens.access_token);
    expect(introspected).toMatchObject({ active: true, sub: user.userId, client_id: app.clientId, scope: SCOPE, iss: issuer });

    const info = await client.fetchUserInfo(config, tokens.access_token, user.userId);
    expect(info).toEqual({ sub: user.userId, name: 'Test User', email: user.email, email_verified: false });

    await client.tokenRevocation(config, tokens.refresh_token!);

    expect(await client.tokenIntrospection(resourceServer, tokens.access_token)).toEqual({ active: false });
    const refused = client.fetchUserInfo(config, tokens.access_token, user.userId);
    await expect(refused).rejects.toBeInstanceOf(client.WWWAuthenticateChallengeError);
    await expect(refused).rejects.toMatchObject({ status: 401 });
    await expect(refused).rejects.toMatchObject({
      cause: [expect.objectContaining({ scheme: 'bearer', parameters: expect.objectContaining({ error: 'invalid_token' }) })],
    });
    await expect(client.refreshTokenGrant(config, tokens.refresh_token!)).rejects.toMatchObject({ error: 'invalid_grant' });
  });
});

it('RFC 6749 §5.2: a wrong secret meets the Basic challenge openid-client expects', async () => {
  const bot = await seedClient(t, { kind: 'bot', type: 'confidential' });
  const wrong = await configure(bot.clientId, 'not the secret');
  const refused = client.initiateDeviceAuthorization(wrong, { scope: SCOPE });
  await expect(refused).rejects.toBeInstanceOf(client.WWWAuthenticateChallengeError);
  await expect(refused).rejects.toMatchObject({ status: 401, cause: [expect.objectContaining({ scheme: 'basic' })] });
});
