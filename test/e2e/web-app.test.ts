import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import * as oidc from 'openid-client';
import type { Page } from 'playwright-core';
import { afterAll, describe, expect, it } from 'vitest';
import { seedUser } from '../helpers/app.js';
import { expectHeading, expectVisible, openPage, screenshot, signInHere, useE2e } from '../helpers/chromium.js';
import { seedWebApp } from '../helpers/web-app.js';

/**
 * Issue 21 §3: a web app's sign-in driven by openid-client (panva), configured from the discovery
 * document alone, with a real browser for the user's part. The app's callback is a small server on
 * another loopback port (a native-app style http://127.0.0.1 redirect URI, RFC 8252 §7.3), which
 * the browser reaches through the server's own pages and their CSP, and which only records what
 * it was called with. Whatever openid-client rejects (state, iss, nonce, the ID token's signature
 * against the JWKS) is a bug in the server.
 */
let callbackServer: Server | undefined;
const callbacks: URL[] = [];
let REDIRECT_URI = '';

async function startCallbackServer(): Promise<string> {
  const server = createServer((request, response) => {
    callbacks.push(new URL(request.url ?? '/', REDIRECT_URI));
    response.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    response.end('<!doctype html><title>Photo Board</title><h1>Back at the app</h1>');
  });
  callbackServer = server;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/callback`;
}
afterAll(() => new Promise<void>((resolve) => (callbackServer ? callbackServer.close(() => resolve()) : resolve())));

const suite = useE2e(async (t) => {
  REDIRECT_URI = await startCallbackServer();
  return {
    publicApp: await seedWebApp(t, { name: 'Photo Board', redirectUris: [REDIRECT_URI] }),
    confidentialApp: await seedWebApp(t, { type: 'confidential', name: 'Photo Server', redirectUris: [REDIRECT_URI] }),
  };
});

/** A page whose browser may reach the server and the app's callback, and nothing else. */
async function openAppPage(): Promise<Page> {
  const { page } = await openPage(suite.e2e);
  const allowed = new Set([suite.e2e.origin, new URL(REDIRECT_URI).origin]);
  await page.context().unroute(() => true);
  await page.context().route(
    (url) => !allowed.has(url.origin),
    (route) => route.abort('blockedbyclient'),
  );
  return page;
}

/** The URL the app's callback was last called with. */
function lastCallback(): URL {
  const last = callbacks.at(-1);
  if (!last) throw new Error('the callback was never called');
  return last;
}

const SCOPE = 'openid profile email offline_access';

function configure(clientId: string, secret: string | null): Promise<oidc.Configuration> {
  return oidc.discovery(new URL(suite.e2e.origin), clientId, undefined, secret === null ? oidc.None() : oidc.ClientSecretBasic(secret), {
    execute: [oidc.allowInsecureRequests, oidc.enableNonRepudiationChecks],
  });
}

/** The browser goes to the authorization URL, signs in, allows; resolves with the URL the app's callback was called with. */
async function signInOnTheWeb(page: Page, url: URL, user: { email: string; password: string }, name: string): Promise<URL> {
  await page.goto(url.href);
  await signInHere(page, user);
  await expectHeading(page, `Allow ${name} to use your account?`);
  await expectVisible(page.getByText('See your email address'));
  await expectVisible(page.getByText(new URL(REDIRECT_URI).host));
  await screenshot(page, `web-app-consent-${name.replace(/\s+/g, '-').toLowerCase()}`);
  await page.getByRole('button', { name: 'Allow' }).click();
  await expectHeading(page, 'Back at the app');
  return lastCallback();
}

describe('a web app signs its user in with openid-client (authorization code + PKCE)', () => {
  for (const kind of ['public', 'confidential'] as const) {
    it(`${kind} client: authorization URL, sign-in, consent, callback, code exchange, ID token, refresh, userinfo, revocation`, async () => {
      const app = kind === 'public' ? suite.publicApp : suite.confidentialApp;
      const config = await configure(app.clientId, app.clientSecret);
      expect(config.serverMetadata().authorization_endpoint).toBe(`${suite.e2e.origin}/oauth/authorize`);
      const user = await seedUser(suite.e2e.t);
      const verifier = oidc.randomPKCECodeVerifier();
      const state = oidc.randomState();
      const nonce = oidc.randomNonce();
      const url = oidc.buildAuthorizationUrl(config, {
        redirect_uri: REDIRECT_URI,
        scope: SCOPE,
        code_challenge: await oidc.calculatePKCECodeChallenge(verifier),
        code_challenge_method: 'S256',
        state,
        nonce,
      });
      const page = await openAppPage();
      const callback = await signInOnTheWeb(page, url, user, app.name);
      expect(callback.searchParams.get('iss')).toBe(suite.e2e.origin);

      const tokens = await oidc.authorizationCodeGrant(config, callback, {
        pkceCodeVerifier: verifier,
        expectedState: state,
        expectedNonce: nonce,
        idTokenExpected: true,
      });
      const claims = tokens.claims();
      expect(claims?.sub).toBe(user.userId);
      expect(claims?.nonce).toBe(nonce);
      expect(tokens.refresh_token).toMatch(/^da_rt_/);

      const info = await oidc.fetchUserInfo(config, tokens.access_token, user.userId);
      expect(info.email).toBe(user.email);

      const refreshed = await oidc.refreshTokenGrant(config, tokens.refresh_token!);
      expect(refreshed.refresh_token).not.toBe(tokens.refresh_token);
      expect(refreshed.claims()?.sub).toBe(user.userId);

      await oidc.tokenRevocation(config, refreshed.refresh_token!);
      await expect(oidc.refreshTokenGrant(config, refreshed.refresh_token!)).rejects.toMatchObject({ error: 'invalid_grant' });

      // The consent is remembered: a second sign-in goes straight back to the app.
      const again = oidc.buildAuthorizationUrl(config, {
        redirect_uri: REDIRECT_URI,
        scope: 'openid',
        code_challenge: await oidc.calculatePKCECodeChallenge(oidc.randomPKCECodeVerifier()),
        code_challenge_method: 'S256',
        state: oidc.randomState(),
      });
      await page.goto(again.href);
      await expectHeading(page, 'Back at the app');
    });
  }

  it('prompt=none without a session comes back to the app as login_required, which openid-client reports', async () => {
    const config = await configure(suite.publicApp.clientId, null);
    const state = oidc.randomState();
    const verifier = oidc.randomPKCECodeVerifier();
    const url = oidc.buildAuthorizationUrl(config, {
      redirect_uri: REDIRECT_URI,
      scope: 'openid',
      code_challenge: await oidc.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
      state,
      prompt: 'none',
    });
    const page = await openAppPage();
    await page.goto(url.href);
    await expectHeading(page, 'Back at the app');
    await expect(oidc.authorizationCodeGrant(config, lastCallback(), { pkceCodeVerifier: verifier, expectedState: state })).rejects.toMatchObject({
      error: 'login_required',
    });
  });

  it('an unregistered redirect URI is shown as an error page, and the browser goes nowhere else', async () => {
    const opened = await openPage(suite.e2e);
    const config = await configure(suite.publicApp.clientId, null);
    const url = oidc.buildAuthorizationUrl(config, {
      redirect_uri: 'https://evil.example/steal',
      scope: 'openid',
      code_challenge: await oidc.calculatePKCECodeChallenge(oidc.randomPKCECodeVerifier()),
      code_challenge_method: 'S256',
      state: oidc.randomState(),
    });
    await opened.page.goto(url.href);
    await expectHeading(opened.page, 'This sign-in link does not work');
    expect(opened.requests.map((request) => new URL(request.url()).origin).filter((origin) => origin !== suite.e2e.origin)).toEqual([]);
  });
});
