import { generateKeyPair, SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { afterAnnounced, basicAuth, FORM, form, seedUser, startTestApp, type TestApp } from '../helpers/app.js';
import { Browser, signedInBrowser } from '../helpers/browser.js';
import { refresh, userinfo } from '../helpers/tokens.js';
import { authorizeUrl, codeFor, pkcePair, REDIRECT_URI, seedWebApp, type WebApp } from '../helpers/web-app.js';
import { setClientDisabled } from '../../src/apps/registration.js';

/**
 * Issue 29 §5: OpenID Connect RP-Initiated Logout 1.0. The browser session here ends; the app's
 * grants do not. Every refusal is our own 400 page: nobody is redirected and nobody signed out.
 */

const AFTER_LOGOUT = 'https://photos.example/signed-out';

let t: TestApp;
let app: WebApp;
let other: WebApp;

beforeAll(async () => {
  t = await startTestApp();
  app = await seedWebApp(t, { type: 'confidential' });
  await t.deps.db
    .updateTable('clients')
    .set({ post_logout_redirect_uris: [AFTER_LOGOUT] })
    .where('client_id', '=', app.clientId)
    .execute();
  other = await seedWebApp(t, { name: 'Other Board' });
});
afterAll(() => t.close());

type User = Awaited<ReturnType<typeof seedUser>>;

/** Signs `user` in on a browser and has `app` sign them in through it: the browser, and the app's tokens. */
async function signedInThroughApp(user: User, client: WebApp = app) {
  const browser = await signedInBrowser(t, user);
  const pkce = pkcePair();
  const code = (await codeFor(browser, authorizeUrl(client, pkce.challenge, { scope: 'openid offline_access' }))).get('code') ?? '';
  const auth = client.clientSecret === null ? { client_id: client.clientId } : {};
  const headers = client.clientSecret === null ? {} : { authorization: basicAuth(client.clientId, client.clientSecret) };
  const res = await t.app.inject({
    method: 'POST',
    url: '/oauth/token',
    headers: { ...FORM, ...headers },
    payload: form({ grant_type: 'authorization_code', redirect_uri: REDIRECT_URI, code, code_verifier: pkce.verifier, ...auth }),
  });
  expect(res.statusCode, res.body).toBe(200);
  const tokens = res.json<{ id_token: string; access_token: string; refresh_token: string }>();
  return { browser, tokens };
}

function logoutUrl(parameters: Record<string, string | undefined>): string {
  const query = new URLSearchParams(Object.entries(parameters).filter((entry): entry is [string, string] => entry[1] !== undefined));
  return `/logout?${query.toString()}`;
}

/** Whether the browser is still signed in here: the authorization endpoint asks for consent or goes straight on, or asks to sign in. */
async function stillSignedIn(browser: Browser, client: WebApp = app): Promise<boolean> {
  const res = await browser.get(authorizeUrl(client, pkcePair().challenge, { scope: 'openid offline_access' }));
  if (res.statusCode === 200) return true;
  expect(res.statusCode, res.body).toBe(303);
  return !String(res.headers.location).startsWith('/signin');
}

async function sessionRows(userId: string): Promise<number> {
  const rows = await t.deps.db.selectFrom('browser_sessions').select('session_hash').where('user_id', '=', userId).execute();
  return rows.length;
}

describe('discovery (RP-Initiated Logout 1.0 §2.1)', () => {
  it('names the end_session_endpoint, served by GET and by POST', async () => {
    const metadata = (await t.app.inject({ method: 'GET', url: '/.well-known/openid-configuration' })).json();
    expect(metadata.end_session_endpoint).toBe('http://localhost:3000/logout');
    expect((await t.app.inject({ method: 'GET', url: '/logout' })).statusCode).toBe(200);
    expect((await t.app.inject({ method: 'POST', url: '/logout', headers: FORM, payload: '' })).statusCode).toBe(303);
  });
});

describe('a hint naming the signed-in user ends the session without a question', () => {
  it("mod_auth_openidc's request (id_token_hint and post_logout_redirect_uri only, by GET): the session ends, the browser goes back with nothing added, and the next authorization asks for the password", async () => {
    const user = await seedUser(t);
    const { browser, tokens } = await signedInThroughApp(user);
    expect(await sessionRows(user.userId)).toBe(1);
    const res = await browser.get(logoutUrl({ id_token_hint: tokens.id_token, post_logout_redirect_uri: AFTER_LOGOUT }));
    expect(res.statusCode, res.body).toBe(303);
    expect(res.headers.location).toBe(AFTER_LOGOUT);
    expect(await sessionRows(user.userId)).toBe(0);
    expect(browser.cookies.has('da_session')).toBe(false);
    expect(await stillSignedIn(browser)).toBe(false);
  });

  it('state comes back unchanged with the redirect (§3)', async () => {
    const { browser, tokens } = await signedInThroughApp(await seedUser(t));
    const state = 'opaque state/with ?&= and ünïcode';
    const res = await browser.get(logoutUrl({ id_token_hint: tokens.id_token, post_logout_redirect_uri: AFTER_LOGOUT, state, client_id: app.clientId }));
    const location = new URL(String(res.headers.location));
    expect(`${location.origin}${location.pathname}`).toBe(AFTER_LOGOUT);
    expect(location.searchParams.get('state')).toBe(state);
  });

  it('an expired ID token is still a valid hint (§2): the app signs out long after it signed in', async () => {
    const user = await seedUser(t);
    const { browser, tokens } = await signedInThroughApp(user);
    // Past the token's exp; the browser session (SESSION_TTL) is still live.
    t.clock.advance(t.config.idTokenTtl + 60);
    const res = await browser.get(logoutUrl({ id_token_hint: tokens.id_token, post_logout_redirect_uri: AFTER_LOGOUT }));
    expect(res.statusCode, res.body).toBe(303);
    expect(await sessionRows(user.userId)).toBe(0);
  });

  it('without post_logout_redirect_uri the user sees "You are signed out" here, drawn for nobody', async () => {
    const user = await seedUser(t);
    const { browser, tokens } = await signedInThroughApp(user);
    const res = await browser.get(logoutUrl({ id_token_hint: tokens.id_token }));
    expect(res.statusCode, res.body).toBe(200);
    expect(res.body).toContain('You are signed out');
    expect(res.body).not.toContain(user.email);
    expect(await sessionRows(user.userId)).toBe(0);
  });

  it("signing out of the browser is not signing the app's grant out: its refresh and access tokens keep working (it revokes them itself)", async () => {
    const user = await seedUser(t);
    const { browser, tokens } = await signedInThroughApp(user);
    await browser.get(logoutUrl({ id_token_hint: tokens.id_token, post_logout_redirect_uri: AFTER_LOGOUT }));
    expect(await sessionRows(user.userId)).toBe(0);
    expect((await userinfo(t, tokens.access_token)).statusCode).toBe(200);
    expect((await refresh(t, app, tokens.refresh_token)).statusCode).toBe(200);
  });
});

describe('a request not tied to the signed-in user is confirmed on a page first', () => {
  it('no hint (client_id only): a confirmation page with a CSRF token; only its answer ends the session, then back to the app', async () => {
    const user = await seedUser(t);
    const browser = await signedInBrowser(t, user);
    const page = await browser.get(logoutUrl({ client_id: app.clientId, post_logout_redirect_uri: AFTER_LOGOUT, state: 's1' }));
    expect(page.statusCode, page.body).toBe(200);
    expect(page.body).toContain('Photo Board asks to sign you out');
    expect(page.body).toContain('name="csrf_token"');
    // The confirmation's answer redirects to the app: the page's form-action allows that origin.
    expect(String(page.headers['content-security-policy'])).toContain("form-action 'self' https://photos.example");
    expect(await sessionRows(user.userId)).toBe(1);

    const forged = await browser.post('/logout/confirm', { client_id: app.clientId, post_logout_redirect_uri: AFTER_LOGOUT }, { csrfToken: null });
    expect(forged.statusCode).toBe(403);
    expect(await sessionRows(user.userId)).toBe(1);

    const answer = await browser.post('/logout/confirm', { client_id: app.clientId, post_logout_redirect_uri: AFTER_LOGOUT, state: 's1' });
    expect(answer.statusCode, answer.body).toBe(303);
    expect(answer.headers.location).toBe(`${AFTER_LOGOUT}?state=s1`);
    expect(await sessionRows(user.userId)).toBe(0);
    expect(await stillSignedIn(browser)).toBe(false);
  });

  it("a hint naming someone else than the browser's user: asked first, nothing ended by the request alone", async () => {
    const { tokens } = await signedInThroughApp(await seedUser(t));
    const someoneElse = await seedUser(t);
    const browser = await signedInBrowser(t, someoneElse);
    const page = await browser.get(logoutUrl({ id_token_hint: tokens.id_token, post_logout_redirect_uri: AFTER_LOGOUT }));
    expect(page.statusCode, page.body).toBe(200);
    expect(page.body).toContain('action="/logout/confirm"');
    expect(await sessionRows(someoneElse.userId)).toBe(1);
    expect(await stillSignedIn(browser)).toBe(true);
  });

  it('no parameters at all: asked first, then "You are signed out" here', async () => {
    const user = await seedUser(t);
    const browser = await signedInBrowser(t, user);
    const page = await browser.get('/logout');
    expect(page.body).toContain('A website asks to sign you out');
    const answer = await browser.post('/logout/confirm', {});
    expect(answer.statusCode).toBe(200);
    expect(answer.body).toContain('You are signed out');
    expect(await sessionRows(user.userId)).toBe(0);
  });

  it('nobody signed in here: nothing to end or confirm, straight back to the app', async () => {
    const res = await new Browser(t).get(logoutUrl({ client_id: app.clientId, post_logout_redirect_uri: AFTER_LOGOUT }));
    expect(res.statusCode).toBe(303);
    expect(res.headers.location).toBe(AFTER_LOGOUT);
  });

  it('ui_locales picks the language of the page before Accept-Language', async () => {
    const browser = new Browser(t, { headers: { 'accept-language': 'en' } });
    await browser.get('/signin');
    const user = await seedUser(t);
    await browser.post('/signin', { email: user.email, password: user.password });
    const page = await browser.get(logoutUrl({ client_id: app.clientId, ui_locales: 'de-AT fr' }));
    expect(page.statusCode, page.body).toBe(200);
    expect(page.headers['content-language']).toBe('de');
    expect(page.body).toContain('Abmelden?');
  });
});

describe('POST from the app (§2: form serialisation)', () => {
  it('goes on as a GET of the same parameters, which carries the SameSite=Lax cookie, and is handled as one', async () => {
    const user = await seedUser(t);
    const { browser, tokens } = await signedInThroughApp(user);
    // The app's own form: cross-site, so no cookie of ours and no CSRF token.
    const posted = await t.app.inject({
      method: 'POST',
      url: '/logout',
      headers: FORM,
      payload: form({ id_token_hint: tokens.id_token, post_logout_redirect_uri: AFTER_LOGOUT, state: 'p' }),
    });
    expect(posted.statusCode, posted.body).toBe(303);
    const location = String(posted.headers.location);
    expect(location.startsWith('/logout?')).toBe(true);
    expect(await sessionRows(user.userId)).toBe(1);
    const res = await browser.get(location);
    expect(res.statusCode).toBe(303);
    expect(res.headers.location).toBe(`${AFTER_LOGOUT}?state=p`);
    expect(await sessionRows(user.userId)).toBe(0);
  });
});

describe('refusals: a 400 page, nobody redirected, nobody signed out', () => {
  async function refused(parameters: Record<string, string | undefined>, words: string) {
    const user = await seedUser(t);
    const browser = await signedInBrowser(t, user);
    const res = await browser.get(logoutUrl(parameters));
    expect(res.statusCode, res.body).toBe(400);
    expect(res.headers['content-type']).toContain('text/html');
    expect(res.headers.location).toBeUndefined();
    expect(res.body).toContain(words);
    expect(await sessionRows(user.userId)).toBe(1);
  }

  it('a post_logout_redirect_uri the app did not register exactly', async () => {
    const { tokens } = await signedInThroughApp(await seedUser(t));
    await refused({ id_token_hint: tokens.id_token, post_logout_redirect_uri: `${AFTER_LOGOUT}/` }, 'has not registered');
    await refused({ id_token_hint: tokens.id_token, post_logout_redirect_uri: 'https://evil.example/' }, 'has not registered');
    // Its login redirect URI is not a post-logout one.
    await refused({ id_token_hint: tokens.id_token, post_logout_redirect_uri: REDIRECT_URI }, 'has not registered');
  });

  it('a post_logout_redirect_uri without a hint or client_id to check it against', async () => {
    await refused({ post_logout_redirect_uri: AFTER_LOGOUT }, 'without saying which app it is');
  });

  it("a client_id that is not the hint's audience", async () => {
    const { tokens } = await signedInThroughApp(await seedUser(t));
    await refused({ id_token_hint: tokens.id_token, client_id: other.clientId }, 'named itself differently');
  });

  it('an unknown or disabled app', async () => {
    await refused({ client_id: 'web_nosuchapp' }, 'not known to this service');
    const disabled = await seedWebApp(t, { name: 'Gone Board' });
    const { tokens } = await signedInThroughApp(await seedUser(t), disabled);
    await afterAnnounced(t, () => setClientDisabled(t.deps.db, disabled.clientId, true, t.clock.now()));
    await refused({ id_token_hint: tokens.id_token }, 'not known to this service');
  });

  it('a hint we did not sign, or signed for another issuer, or not a JWT', async () => {
    const { tokens } = await signedInThroughApp(await seedUser(t));
    const [header, payload] = tokens.id_token.split('.');
    const { privateKey } = await generateKeyPair('RS256');
    const ourKey = t.deps.keys.signingKey();
    const claims = { sub: 'someone', aud: app.clientId };
    const foreign = await new SignJWT({ ...claims, iss: 'http://localhost:3000' }).setProtectedHeader({ alg: 'RS256', kid: ourKey.kid }).sign(privateKey);
    const otherIssuer = await new SignJWT({ ...claims, iss: 'https://evil.example' })
      .setProtectedHeader({ alg: 'RS256', kid: ourKey.kid })
      .sign(ourKey.privateKey);
    const unsigned = `${header}.${payload}.`;
    for (const hint of [foreign, otherIssuer, unsigned, 'not-a-jwt', `${header}.${payload}.${'A'.repeat(342)}`]) {
      await refused({ id_token_hint: hint, post_logout_redirect_uri: AFTER_LOGOUT }, 'did not issue or cannot check');
    }
  });

  it.each([
    ['a NUL', '%00'],
    ['a lone surrogate', '%ED%A0%80'],
    ['invalid UTF-8', '%FF%FE'],
  ])('%s in any parameter, by GET or POST', async (_what, bytes) => {
    const user = await seedUser(t);
    const browser = await signedInBrowser(t, user);
    for (const name of ['id_token_hint', 'client_id', 'post_logout_redirect_uri', 'state', 'ui_locales']) {
      const get = await browser.get(`/logout?${name}=a${bytes}b`);
      expect(get.statusCode, `${name}: ${get.body}`).toBe(400);
      expect(get.headers['content-type']).toContain('text/html');
      const post = await t.app.inject({ method: 'POST', url: '/logout', headers: FORM, payload: `${name}=a${bytes}b` });
      expect(post.statusCode, `${name}: ${post.body}`).toBe(400);
      expect(post.headers['content-type']).toContain('text/html');
    }
    expect(await sessionRows(user.userId)).toBe(1);
  });

  it('a huge hint or state is a 400 page before any work, by GET or POST', async () => {
    const user = await seedUser(t);
    const browser = await signedInBrowser(t, user);
    for (const [parameters, words] of [
      [{ id_token_hint: `${'a'.repeat(3000)}.${'b'.repeat(1500)}.c` }, 'did not issue or cannot check'],
      [{ state: 's'.repeat(600) }, 'could not be read'],
    ] as const) {
      const get = await browser.get(logoutUrl(parameters));
      expect(get.statusCode).toBe(400);
      expect(get.body).toContain(words);
      // By POST: refused at once, or (a hint is checked in one place) on the GET it continues as.
      const post = await t.app.inject({ method: 'POST', url: '/logout', headers: FORM, payload: form(parameters) });
      const answer = post.statusCode === 303 ? await browser.follow(post) : post;
      expect(answer.statusCode).toBe(400);
      expect(answer.body).toContain(words);
    }
    // Past the bound of any request line: refused by the server as a whole; by POST, a 400 page, not a 414 redirect.
    expect((await browser.get(logoutUrl({ id_token_hint: 'a'.repeat(10_000) }))).statusCode).toBe(414);
    const long = await t.app.inject({ method: 'POST', url: '/logout', headers: FORM, payload: form({ id_token_hint: 'a'.repeat(10_000) }) });
    expect(long.statusCode).toBe(400);
    expect(long.body).toContain('the request is too long');
    expect(await sessionRows(user.userId)).toBe(1);
  });

  it('a repeated parameter', async () => {
    const user = await seedUser(t);
    const browser = await signedInBrowser(t, user);
    const res = await browser.get(`/logout?client_id=${app.clientId}&client_id=${other.clientId}`);
    expect(res.statusCode).toBe(400);
    expect(await sessionRows(user.userId)).toBe(1);
  });
});
