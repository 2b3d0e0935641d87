import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { afterAnnounced, seedClient, seedUser, startTestApp, type TestApp } from '../helpers/app.js';
import { Browser, signedInBrowser } from '../helpers/browser.js';
import { answerAtApp, answerConsent, authorizeUrl, codeFor, hiddenFields, pkcePair, REDIRECT_URI, seedWebApp, type WebApp } from '../helpers/web-app.js';

let t: TestApp;
let app: WebApp;
const ISSUER = 'http://localhost:3000';

beforeAll(async () => {
  t = await startTestApp();
  app = await seedWebApp(t);
});
afterAll(() => t.close());

const { challenge } = pkcePair();

/** A shown error: a page of ours, never a redirect anywhere. */
function expectShownError(response: { statusCode: number; headers: Record<string, unknown>; body: string }) {
  expect(response.statusCode, response.body).toBe(400);
  expect(response.headers.location).toBeUndefined();
  expect(String(response.headers['content-type'])).toContain('text/html');
  expect(response.body).toContain('This sign-in link does not work');
}

describe('the authorization endpoint never redirects where the app did not register', () => {
  it('shows an error page for an unknown app, a disabled one, or no client_id', async () => {
    const browser = new Browser(t);
    expectShownError(await browser.get(authorizeUrl({ clientId: 'web_nope' }, challenge)));
    expectShownError(await browser.get(authorizeUrl({ clientId: '' }, challenge, { client_id: undefined })));
    expectShownError(await browser.get(authorizeUrl({ clientId: 'web_\u00e9t\u00e9' }, challenge)));
  });

  it('shows an error page for a missing redirect_uri, or one that is not registered exactly', async () => {
    const browser = new Browser(t);
    expectShownError(await browser.get(authorizeUrl(app, challenge, { redirect_uri: undefined })));
    const attempts = [
      'https://evil.example/callback',
      'https://photos.example/callback/',
      'https://photos.example/callback/../evil',
      'https://photos.example/callback?next=https://evil.example',
      'https://photos.example/Callback',
      'https://PHOTOS.example/callback',
      'https://photos.example.evil.example/callback',
      'https://photos.example@evil.example/callback',
      'https://evil.example/?https://photos.example/callback',
      'http://photos.example/callback',
      'https://photos.example/callback#fragment',
      'https://photos.example:443/callback',
      '//evil.example/callback',
      'javascript:alert(1)',
      ' https://photos.example/callback',
    ];
    for (const redirect of attempts) {
      const response = await browser.get(authorizeUrl(app, challenge, { redirect_uri: redirect }));
      expectShownError(response);
    }
  });

  it('even an error that would be sent back is shown when the redirect URI is not registered', async () => {
    const response = await new Browser(t).get(authorizeUrl(app, challenge, { response_type: 'token', redirect_uri: 'https://evil.example/' }));
    expectShownError(response);
  });

  it('refuses a repeated parameter on a page, without redirecting', async () => {
    const url = `${authorizeUrl(app, challenge)}&redirect_uri=${encodeURIComponent('https://evil.example/')}`;
    const response = await new Browser(t).get(url);
    expect(response.statusCode).toBe(400);
    expect(response.headers.location).toBeUndefined();
  });

  it('refuses invalid UTF-8, a lone surrogate and NUL anywhere in the query with a page, not a redirect', async () => {
    for (const bad of ['%FF', '%ED%A0%80', '%00', 'a%00b']) {
      for (const name of ['state', 'nonce', 'redirect_uri', 'scope', 'client_id']) {
        const url = authorizeUrl(app, challenge, { [name]: undefined });
        const response = await new Browser(t).get(`${url}&${name}=${bad}`);
        expect(response.statusCode, `${name}=${bad}`).toBe(400);
        expect(response.headers.location, `${name}=${bad}`).toBeUndefined();
      }
    }
  });
});

describe('errors go back to a registered redirect URI with state and iss (RFC 9207)', () => {
  const cases: Array<[string, Record<string, string | undefined>, string]> = [
    ['response_type other than code', { response_type: 'token' }, 'unsupported_response_type'],
    ['no response_type', { response_type: undefined }, 'invalid_request'],
    ['no PKCE challenge', { code_challenge: undefined }, 'invalid_request'],
    ['PKCE plain', { code_challenge_method: 'plain' }, 'invalid_request'],
    ['no PKCE method (plain by default)', { code_challenge_method: undefined }, 'invalid_request'],
    ['a challenge that is not S256-shaped', { code_challenge: 'short' }, 'invalid_request'],
    ['a scope the app may not have', { scope: 'openid admin' }, 'invalid_scope'],
    ['prompt=none with another value', { prompt: 'none login' }, 'invalid_request'],
    ['an unknown prompt', { prompt: 'sideways' }, 'invalid_request'],
    ['max_age that is not a number', { max_age: '-1' }, 'invalid_request'],
    ['a request object', { request: 'eyJhbGciOiJub25lIn0.e30.' }, 'request_not_supported'],
    ['a request_uri', { request_uri: 'https://photos.example/request' }, 'request_uri_not_supported'],
    ['an overlong nonce', { nonce: 'n'.repeat(257) }, 'invalid_request'],
  ];
  for (const [name, extra, error] of cases) {
    it(`${name}: ${error}`, async () => {
      const params = answerAtApp(await new Browser(t).get(authorizeUrl(app, challenge, extra)));
      expect(params.get('error')).toBe(error);
      expect(params.get('state')).toBe('state-123');
      expect(params.get('iss')).toBe(ISSUER);
      expect(params.get('code')).toBeNull();
    });
  }

  it('a state too long to send back is invalid_request without state', async () => {
    for (const state of ['s'.repeat(513)]) {
      const params = answerAtApp(await new Browser(t).get(authorizeUrl(app, challenge, { state })));
      expect(params.get('error')).toBe('invalid_request');
      expect(params.get('state')).toBeNull();
    }
  });

  it('an app not registered for the authorization_code grant gets unauthorized_client', async () => {
    // Registration now refuses a redirect URI without the grant; a row from before that rule (or
    // written by hand) still has one, and the endpoint still refuses it.
    const deviceOnly = await seedClient(t, { kind: 'web', grantTypes: ['authorization_code'], redirectUris: [REDIRECT_URI] });
    await afterAnnounced(t, () =>
      t.deps.db
        .updateTable('clients')
        .set({ grant_types: ['urn:ietf:params:oauth:grant-type:device_code'] })
        .where('client_id', '=', deviceOnly.clientId)
        .execute(),
    );
    const params = answerAtApp(await new Browser(t).get(authorizeUrl(deviceOnly, challenge)));
    expect(params.get('error')).toBe('unauthorized_client');
  });

  it('the way back through sign-in is bounded: an authorization request past 4 KiB falls back to /activate, one within it is kept', async () => {
    const browser = new Browser(t);
    const long = authorizeUrl(app, challenge, { nonce: 'n'.repeat(200), padding: 'p'.repeat(4000) });
    expect((await browser.get(`/signin?return_to=${encodeURIComponent(long)}`)).body).toContain('name="return_to" value="/activate"');
    const within = authorizeUrl(app, challenge, { padding: 'p'.repeat(2000) });
    expect((await browser.get(`/signin?return_to=${encodeURIComponent(within)}`)).body).toContain('name="return_to" value="/oauth/authorize?');
  });

  it('unknown parameters are ignored', async () => {
    const response = await new Browser(t).get(authorizeUrl(app, challenge, { display: 'popup', ui_locales: 'de', foo: 'bar' }));
    expect(response.statusCode).toBe(303);
    expect(String(response.headers.location)).toMatch(/^\/signin\?return_to=/);
  });
});

describe('signing in and consenting', () => {
  it('sends a visitor to sign in, then asks for consent, then returns a code with state and iss', async () => {
    const user = await seedUser(t);
    const browser = new Browser(t);
    const url = authorizeUrl(app, challenge);
    const toSignIn = await browser.get(url);
    expect(toSignIn.statusCode).toBe(303);
    const signInPage = await browser.follow(toSignIn);
    expect(signInPage.statusCode).toBe(200);
    // The sign-in form's answer may end at the app: the page's CSP allows forms to go there.
    expect(String(signInPage.headers['content-security-policy'])).toContain("form-action 'self' https://photos.example");
    const signedIn = await browser.post('/signin', { email: user.email, password: user.password, return_to: hiddenFields(signInPage.body).return_to });
    expect(signedIn.headers.location).toBe(url);
    const consent = await browser.follow(signedIn);
    expect(consent.statusCode).toBe(200);
    expect(consent.body).toContain('Allow Photo Board to use your account?');
    expect(consent.body).toContain('See your name');
    expect(consent.body).toContain('photos.example');
    expect(consent.body).toContain(user.email);
    expect(String(consent.headers['content-security-policy'])).toContain("form-action 'self' https://photos.example;");
    const params = answerAtApp(await answerConsent(browser, consent, 'allow'));
    expect(params.get('code')).toMatch(/^da_ac_[A-Za-z0-9_-]{43}$/);
    expect(params.get('state')).toBe('state-123');
    expect(params.get('iss')).toBe(ISSUER);
  });

  it('a registered redirect URI with a query keeps it, and the answer is added to it', async () => {
    const withQuery = await seedWebApp(t, { redirectUris: ['https://photos.example/cb?tenant=7'] });
    const browser = await signedInBrowser(t, await seedUser(t));
    const page = await browser.get(authorizeUrl(withQuery, challenge, { redirect_uri: 'https://photos.example/cb?tenant=7' }));
    const location = new URL(String((await answerConsent(browser, page, 'allow')).headers.location));
    expect(location.searchParams.get('tenant')).toBe('7');
    expect(location.searchParams.get('code')).toMatch(/^da_ac_/);
  });

  it('Deny sends access_denied back, with state', async () => {
    const browser = await signedInBrowser(t, await seedUser(t));
    const params = answerAtApp(await answerConsent(browser, await browser.get(authorizeUrl(app, challenge)), 'deny'));
    expect(params.get('error')).toBe('access_denied');
    expect(params.get('state')).toBe('state-123');
    expect(params.get('code')).toBeNull();
  });

  it('the consent form needs the CSRF token of the browser that saw it', async () => {
    const browser = await signedInBrowser(t, await seedUser(t));
    const page = await browser.get(authorizeUrl(app, challenge));
    const forged = await browser.post('/oauth/authorize/decision', { ...hiddenFields(page.body), action: 'allow' }, { csrfToken: null });
    expect(forged.statusCode).toBe(403);
    expect(forged.headers.location).toBeUndefined();
  });

  it('consent is remembered for the scopes agreed to; more scopes, or prompt=consent, ask again', async () => {
    const browser = await signedInBrowser(t, await seedUser(t));
    await codeFor(browser, authorizeUrl(app, challenge, { scope: 'openid profile' }));
    const again = await browser.get(authorizeUrl(app, challenge, { scope: 'openid' }));
    expect(answerAtApp(again).get('code')).toMatch(/^da_ac_/);
    const more = await browser.get(authorizeUrl(app, challenge, { scope: 'openid email' }));
    expect(more.statusCode).toBe(200);
    expect(more.body).toContain('See your email address');
    const forced = await browser.get(authorizeUrl(app, challenge, { scope: 'openid', prompt: 'consent' }));
    expect(forced.statusCode).toBe(200);
    expect(forced.body).toContain('name="action" value="allow"');
  });

  it('prompt=none: login_required without a session, consent_required without consent, a code with both', async () => {
    const visitor = answerAtApp(await new Browser(t).get(authorizeUrl(app, challenge, { prompt: 'none' })));
    expect(visitor.get('error')).toBe('login_required');
    expect(visitor.get('state')).toBe('state-123');
    const browser = await signedInBrowser(t, await seedUser(t));
    expect(answerAtApp(await browser.get(authorizeUrl(app, challenge, { prompt: 'none' }))).get('error')).toBe('consent_required');
    await codeFor(browser, authorizeUrl(app, challenge));
    expect(answerAtApp(await browser.get(authorizeUrl(app, challenge, { prompt: 'none' }))).get('code')).toMatch(/^da_ac_/);
  });

  it('prompt=login asks a signed-in user for the password again, then carries on', async () => {
    const user = await seedUser(t);
    const browser = await signedInBrowser(t, user);
    await codeFor(browser, authorizeUrl(app, challenge));
    const toSignIn = await browser.get(authorizeUrl(app, challenge, { prompt: 'login' }));
    expect(String(toSignIn.headers.location)).toContain('again=1');
    const page = await browser.follow(toSignIn);
    expect(page.statusCode).toBe(200);
    expect(page.body).toContain('enter your password again');
    const back = await browser.post('/signin', { email: user.email, password: user.password, return_to: hiddenFields(page.body).return_to });
    expect(back.headers.location).not.toContain('prompt');
    expect(answerAtApp(await browser.follow(back)).get('code')).toMatch(/^da_ac_/);
    // prompt=login consent: after the password, the consent page still shows.
    const both = await browser.follow(await browser.get(authorizeUrl(app, challenge, { prompt: 'login consent' })));
    const afterBoth = await browser.post('/signin', { email: user.email, password: user.password, return_to: hiddenFields(both.body).return_to });
    expect(afterBoth.headers.location).toContain('prompt=consent');
    expect((await browser.follow(afterBoth)).body).toContain('name="action" value="allow"');
  });

  it('anonymous authorization requests write nothing: no code, consent or session row', async () => {
    const count = async () =>
      Promise.all(
        ['authorization_codes', 'consents', 'browser_sessions'].map(async (table) => {
          const row = await t.deps.db
            .selectFrom(table as 'consents')
            .select(({ fn }) => fn.countAll<number>().as('n'))
            .executeTakeFirstOrThrow();
          return Number(row.n);
        }),
      );
    const before = await count();
    const answers = await Promise.all(Array.from({ length: 50 }, () => t.app.inject({ method: 'GET', url: authorizeUrl(app, challenge) })));
    expect(answers.every((res) => res.statusCode === 303)).toBe(true);
    expect(await count()).toEqual(before);
  });

  it('max_age: a sign-in older than it asks again (login_required with prompt=none)', async () => {
    const user = await seedUser(t);
    const browser = await signedInBrowser(t, user);
    await codeFor(browser, authorizeUrl(app, challenge));
    expect(answerAtApp(await browser.get(authorizeUrl(app, challenge, { max_age: '600' }))).get('code')).toMatch(/^da_ac_/);
    t.clock.advance(601);
    expect(answerAtApp(await browser.get(authorizeUrl(app, challenge, { max_age: '600', prompt: 'none' }))).get('error')).toBe('login_required');
    const toSignIn = await browser.get(authorizeUrl(app, challenge, { max_age: '600' }));
    const page = await browser.follow(toSignIn);
    const back = await browser.post('/signin', { email: user.email, password: user.password, return_to: hiddenFields(page.body).return_to });
    expect(answerAtApp(await browser.follow(back)).get('code')).toMatch(/^da_ac_/);
  });

  it('a consent page answered after signing out sends the browser to sign in, and issues nothing', async () => {
    const browser = await signedInBrowser(t, await seedUser(t));
    const page = await browser.get(authorizeUrl(app, challenge));
    const fields = hiddenFields(page.body);
    await browser.post('/signout', {});
    await browser.get('/signin');
    const answer = await browser.post('/oauth/authorize/decision', { ...fields, action: 'allow' });
    expect(answer.statusCode).toBe(303);
    expect(String(answer.headers.location)).toMatch(/^\/signin\?return_to=%2Foauth%2Fauthorize/);
  });

  it('a consent form whose request was changed is checked again: another redirect URI is only shown', async () => {
    const browser = await signedInBrowser(t, await seedUser(t));
    const page = await browser.get(authorizeUrl(app, challenge));
    const answer = await browser.post('/oauth/authorize/decision', { ...hiddenFields(page.body), redirect_uri: 'https://evil.example/', action: 'allow' });
    expectShownError(answer);
  });

  it('the consent page is in German for a German reader', async () => {
    const user = await seedUser(t);
    const browser = new Browser(t, { headers: { 'accept-language': 'de' } });
    await browser.get('/signin');
    await browser.post('/signin', { email: user.email, password: user.password });
    const page = await browser.get(authorizeUrl(app, challenge));
    expect(page.body).toContain('Photo Board erlauben, Ihr Konto zu verwenden?');
    expect(page.body).toContain('Erlauben');
  });
});
