import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apacheAvailable, NavigatingBrowser, startApache, type ApacheServer, type RelyingPartySite } from '../helpers/apache.js';
import { seedClient, seedUser, startTestApp, type TestApp } from '../helpers/app.js';
import { freePort } from '../helpers/server-process.js';
import { userinfoOverHttp } from '../helpers/web.js';
import { hiddenFields } from '../helpers/web-app.js';

/**
 * Issue 29 §5 and §7: Apache 2.4 with mod_auth_openidc (Debian 12's 2.4.12), configured from our
 * discovery document alone, signs a user in with the code flow (PKCE S256) and client_secret_basic
 * or client_secret_post, and signs them out through its logout URL: it revokes its tokens at our
 * revocation endpoint with the same client authentication, then sends the browser to our
 * end_session_endpoint with only id_token_hint and post_logout_redirect_uri. The browser here is
 * a headless client following every redirect by hand, with one cookie jar for both servers.
 */

let t: TestApp;
let issuer: string;
let apache: ApacheServer;
const sites: Record<'client_secret_basic' | 'client_secret_post', RelyingPartySite> = {} as never;

beforeAll(async () => {
  if (!apacheAvailable()) throw new Error('apache2 and libapache2-mod-auth-openidc are not installed (.ci/run installs them)');
  const port = await freePort();
  issuer = `http://127.0.0.1:${port}`;
  t = await startTestApp({ realTime: true, env: { ISSUER: issuer } });
  await t.app.listen({ port, host: '127.0.0.1' });
  for (const method of ['client_secret_basic', 'client_secret_post'] as const) {
    const sitePort = await freePort();
    const base = `http://127.0.0.1:${sitePort}`;
    const app = await seedClient(t, {
      kind: 'web',
      type: 'confidential',
      name: `Intranet (${method})`,
      grantTypes: ['authorization_code', 'refresh_token'],
      redirectUris: [`${base}/protected/redirect_uri`],
      postLogoutRedirectUris: [`${base}/loggedout.html`],
    });
    sites[method] = { port: sitePort, clientId: app.clientId, clientSecret: app.clientSecret ?? '', tokenEndpointAuth: method };
  }
  apache = await startApache(issuer, Object.values(sites));
}, 120_000);

afterAll(async () => {
  await apache?.stop();
  await t?.close();
});

async function sessionRows(userId: string): Promise<number> {
  return (await t.deps.db.selectFrom('browser_sessions').select('session_hash').where('user_id', '=', userId).execute()).length;
}

describe.each(['client_secret_basic', 'client_secret_post'] as const)('Apache mod_auth_openidc with %s', (method) => {
  it('signs in with the code flow, then its logout URL revokes its access token and ends the session here; the next visit asks for the password again', async () => {
    const site = sites[method];
    const apacheBase = `http://127.0.0.1:${site.port}`;
    const user = await seedUser(t);
    const browser = new NavigatingBrowser();
    const log = async () => `\n${await apache.errorLog()}`;

    // 1. The protected page sends the browser to our authorization endpoint, with PKCE.
    const toAuthorize = await browser.get(`${apacheBase}/protected/`);
    expect(toAuthorize.status, `${toAuthorize.body}${await log()}`).toBe(302);
    const authorizeUrl = new URL(String(toAuthorize.location));
    expect(`${authorizeUrl.origin}${authorizeUrl.pathname}`).toBe(`${issuer}/oauth/authorize`);
    expect(authorizeUrl.searchParams.get('code_challenge_method')).toBe('S256');
    // 2. Nobody is signed in here: sign in, then consent.
    const toSignIn = await browser.follow(apacheBase, toAuthorize);
    const signInPage = await browser.follow(issuer, toSignIn);
    expect(signInPage.status).toBe(200);
    const signedIn = await browser.post(`${issuer}/signin`, { ...hiddenFields(signInPage.body), email: user.email, password: user.password });
    const consent = await browser.follow(issuer, signedIn);
    expect(consent.status, consent.body).toBe(200);
    const toApp = await browser.post(`${issuer}/oauth/authorize/decision`, { ...hiddenFields(consent.body), action: 'allow' });
    // 3. Back at Apache with the code: it redeems it with its client authentication and checks the ID token.
    const redeemed = await browser.follow(issuer, toApp);
    expect(redeemed.status, `${redeemed.body}${await log()}`).toBe(302);
    const page = await browser.follow(apacheBase, redeemed);
    expect(page.status, `${page.body}${await log()}`).toBe(200);
    expect(page.body).toContain('protected page');
    const info = await browser.get(`${apacheBase}/protected/redirect_uri?info=json`);
    expect(info.status, `${info.body}${await log()}`).toBe(200);
    const session = info.json<{ access_token: string; userinfo: { sub: string; email: string } }>();
    expect(session.userinfo).toMatchObject({ sub: user.userId, email: user.email });
    expect((await userinfoOverHttp(issuer, session.access_token)).status).toBe(200);
    expect(await sessionRows(user.userId)).toBe(1);

    // 4. Its logout URL: revocation at our endpoint, then our end_session_endpoint with the hint alone.
    const afterLogout = `${apacheBase}/loggedout.html`;
    const toEndSession = await browser.get(`${apacheBase}/protected/redirect_uri?logout=${encodeURIComponent(afterLogout)}`);
    expect(toEndSession.status, `${toEndSession.body}${await log()}`).toBe(302);
    const endSessionUrl = new URL(String(toEndSession.location));
    expect(`${endSessionUrl.origin}${endSessionUrl.pathname}`).toBe(`${issuer}/logout`);
    expect(endSessionUrl.searchParams.get('post_logout_redirect_uri')).toBe(afterLogout);
    // Only these two: the app is known from the hint's audience alone.
    expect([...endSessionUrl.searchParams.keys()].sort()).toEqual(['id_token_hint', 'post_logout_redirect_uri']);
    expect(decodeJwt(String(endSessionUrl.searchParams.get('id_token_hint')))).toMatchObject({ sub: user.userId, aud: site.clientId, iss: issuer });
    const backAtApp = await browser.follow(apacheBase, toEndSession);
    expect(backAtApp.status, backAtApp.body).toBe(303);
    expect(backAtApp.location).toBe(afterLogout);
    expect((await browser.follow(issuer, backAtApp)).body).toContain('logged out page');

    // The session here ended, and the revoked access token no longer works.
    expect(await sessionRows(user.userId)).toBe(0);
    const revoked = await userinfoOverHttp(issuer, session.access_token);
    expect(revoked.status, `${revoked.body}${await log()}`).toBe(401);
    // 5. The next visit goes through our sign-in page again.
    const again = await browser.follow(apacheBase, await browser.get(`${apacheBase}/protected/`));
    expect(again.status).toBe(303);
    expect(String(again.location)).toMatch(/^\/signin\?/);
  });
});
