import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { banUser } from '../../src/accounts/bans.js';
import { setUserBannedAt } from '../../src/repositories/users.js';
import { seedClient, seedUser, startTestApp, type TestApp } from '../helpers/app.js';
import { Browser, inputValue, signIn, signedInBrowser } from '../helpers/browser.js';
import { startDeviceFlow } from '../helpers/device.js';

let t: TestApp;
let tv: { clientId: string };

beforeAll(async () => {
  t = await startTestApp();
  tv = await seedClient(t, { kind: 'tv' });
});
afterAll(() => t.close());

const signedInSessions = (userId: string) => t.deps.db.selectFrom('browser_sessions').select('session_hash').where('user_id', '=', userId).execute();

describe('sign-in round trip', () => {
  it('GET /activate?user_code=X sends a signed-out visitor to /signin, and sign-in returns to the code step with the code kept', async () => {
    const user = await seedUser(t);
    const { user_code } = await startDeviceFlow(t, tv.clientId);
    const browser = new Browser(t);

    const activate = await browser.get(`/activate?user_code=${user_code}`);
    expect(activate.statusCode).toBe(303);
    expect(activate.headers.location).toBe(`/signin?return_to=${encodeURIComponent(`/activate?user_code=${user_code}`)}`);

    const signInPage = await browser.follow(activate);
    expect(signInPage.statusCode).toBe(200);
    expect(signInPage.body).toContain('<label for="email">Email</label>');
    expect(signInPage.body).toContain('<label for="password">Password</label>');
    expect(inputValue(signInPage.body, 'return_to')).toBe(`/activate?user_code=${user_code}`);
    expect(inputValue(signInPage.body, 'csrf_token')).toMatch(/^[A-Za-z0-9_-]{43}$/);

    const signedIn = await browser.post('/signin', { email: user.email, password: user.password, return_to: `/activate?user_code=${user_code}` });
    expect(signedIn.statusCode).toBe(303);
    expect(signedIn.headers.location).toBe(`/activate?user_code=${user_code}`);

    const codeStep = await browser.follow(signedIn);
    expect(codeStep.statusCode).toBe(200);
    expect(codeStep.body).toContain('<label for="user_code">Code</label>');
    expect(inputValue(codeStep.body, 'user_code')).toBe(user_code);
    expect(codeStep.body).toContain('Sign out');
  });

  it('a signed-out visitor on /activate/bot is sent to sign in and back to /activate/bot', async () => {
    const browser = new Browser(t);
    const res = await browser.get('/activate/bot');
    expect(res.headers.location).toBe(`/signin?return_to=${encodeURIComponent('/activate/bot')}`);
  });

  it('emails are matched trimmed and case-insensitively', async () => {
    const user = await seedUser(t);
    const browser = new Browser(t);
    const res = await signIn(browser, { email: `  ${user.email.toUpperCase()} `, password: user.password });
    expect(res.statusCode).toBe(303);
  });

  it('a signed-in visitor on /signin goes straight to where they were going', async () => {
    const browser = await signedInBrowser(t, await seedUser(t));
    const res = await browser.get('/signin?return_to=%2Factivate%2Fbot');
    expect(res.statusCode).toBe(303);
    expect(res.headers.location).toBe('/activate/bot');
  });
});

describe('refused sign-in', () => {
  it.each([
    ['a wrong password', (email: string) => ({ email, password: 'not the password' })],
    ['an unknown email', () => ({ email: 'nobody@example.test', password: 'correct horse battery staple' })],
    ['an empty form', () => ({ email: '', password: '' })],
  ])('%s: 401 page with one generic message, and no session is signed in', async (_case, credentials) => {
    const user = await seedUser(t);
    const browser = new Browser(t);
    await browser.get('/signin');
    const anonymousCookie = browser.cookies.get('da_anon');
    expect(anonymousCookie).toBeDefined();

    const res = await browser.post('/signin', credentials(user.email));
    expect(res.statusCode).toBe(401);
    expect(res.body).toContain('The email or password is incorrect.');
    expect(res.headers['set-cookie']).toBeUndefined();
    expect(browser.cookies.get('da_anon')).toBe(anonymousCookie);
    expect(await signedInSessions(user.userId)).toHaveLength(0);
    expect((await browser.get('/activate')).statusCode).toBe(303);
  });

  it('keeps the typed email (escaped) and drops the password when the form comes back', async () => {
    const browser = new Browser(t);
    await browser.get('/signin');
    const res = await browser.post('/signin', { email: '"><script>alert(1)</script>', password: 'secret-typed-password' });
    expect(res.statusCode).toBe(401);
    expect(res.body).not.toContain('<script>alert(1)</script>');
    expect(res.body).toContain('&quot;&gt;&lt;script&gt;');
    expect(res.body).not.toContain('secret-typed-password');
  });

  it('a banned user is refused with a clear message, even with the right password', async () => {
    const user = await seedUser(t);
    await banUser(t.deps.db, user.email, t.clock.now());
    const browser = new Browser(t);
    const res = await signIn(browser, user);
    expect(res.statusCode).toBe(403);
    expect(res.body).toContain('This account has been suspended');
    expect(await signedInSessions(user.userId)).toHaveLength(0);
  });

  it('a banned user with a wrong password hears only the generic message', async () => {
    const user = await seedUser(t);
    await banUser(t.deps.db, user.email, t.clock.now());
    const res = await signIn(new Browser(t), { email: user.email, password: 'wrong password' });
    expect(res.statusCode).toBe(401);
    expect(res.body).not.toContain('suspended');
  });

  it('a session of a user banned after signing in no longer counts as signed in', async () => {
    const user = await seedUser(t);
    const browser = await signedInBrowser(t, user);
    expect((await browser.get('/activate')).statusCode).toBe(200);
    // Set directly, as another instance or an operator's SQL might: the session row survives.
    await setUserBannedAt(t.deps.db, user.email, t.clock.now());
    expect(await signedInSessions(user.userId)).toHaveLength(1);
    expect((await browser.get('/activate')).statusCode).toBe(303);
  });

  it('POST /signin without a CSRF token is refused with 403 and signs nobody in', async () => {
    const user = await seedUser(t);
    const browser = new Browser(t);
    await browser.get('/signin');
    const res = await browser.post('/signin', { email: user.email, password: user.password }, { csrfToken: null });
    expect(res.statusCode).toBe(403);
    expect(await signedInSessions(user.userId)).toHaveLength(0);
  });

  it('POST /signin from a browser with no session at all is refused with 403', async () => {
    const user = await seedUser(t);
    const res = await new Browser(t).post('/signin', { email: user.email, password: user.password }, { csrfToken: 'guessed' });
    expect(res.statusCode).toBe(403);
    expect(await signedInSessions(user.userId)).toHaveLength(0);
  });
});

describe('browser sessions', () => {
  it('the session cookie is HttpOnly, SameSite=Lax, Path=/ and not Secure over http', async () => {
    const res = await signIn(new Browser(t), await seedUser(t));
    const cookie = res.cookies.find((c) => c.name === 'da_session');
    expect(cookie).toMatchObject({ httpOnly: true, sameSite: 'Lax', path: '/' });
    expect(cookie?.secure).toBeUndefined();
    expect(cookie?.value).toMatch(/^da_ss_[A-Za-z0-9_-]{43}$/);
    expect(cookie?.maxAge).toBe(t.config.sessionTtl);
  });

  it('over https the cookies are Secure and __Host- prefixed, the anonymous one before sign-in and the session one after', async () => {
    const secure = await startTestApp({ env: { ISSUER: 'https://auth.example.test' } });
    try {
      const user = await seedUser(secure);
      const browser = new Browser(secure);
      const first = await browser.get('/signin');
      expect(first.cookies.find((c) => c.name === '__Host-da_anon')).toMatchObject({ secure: true, httpOnly: true, sameSite: 'Lax', path: '/' });
      const signedIn = await browser.post('/signin', { email: user.email, password: user.password });
      expect(signedIn.statusCode).toBe(303);
      expect(signedIn.cookies.find((c) => c.name === '__Host-da_session')).toMatchObject({ secure: true, httpOnly: true, sameSite: 'Lax', path: '/' });
      expect(signedIn.cookies.find((c) => c.name === '__Host-da_anon')).toMatchObject({ secure: true, path: '/', maxAge: 0 });
    } finally {
      await secure.close();
    }
  });

  it('sign-in rotates the session: a new cookie value, a new CSRF token, and the old session is gone', async () => {
    const user = await seedUser(t);
    const browser = new Browser(t);
    await browser.get('/signin');
    const anonymous = { cookie: browser.cookies.get('da_anon'), csrf: browser.csrfToken };
    expect(anonymous.cookie).toBeDefined();
    await browser.post('/signin', { email: user.email, password: user.password });
    const first = browser.cookies.get('da_session');
    expect(first).toBeDefined();
    expect(browser.cookies.has('da_anon')).toBe(false);

    const page = await browser.get('/activate');
    expect(page.statusCode).toBe(200);
    expect(browser.csrfToken).not.toBe(anonymous.csrf);

    // Whoever planted or saw the anonymous cookie is not signed in with it.
    const attacker = new Browser(t);
    attacker.cookies.set('da_anon', anonymous.cookie!);
    expect((await attacker.get('/activate')).statusCode).toBe(303);

    // Signing in again from a signed-in browser replaces its row: the earlier cookie is dead.
    const again = await browser.post('/signin', { email: user.email, password: user.password });
    expect(again.statusCode).toBe(303);
    expect(browser.cookies.get('da_session')).not.toBe(first);
    expect(await signedInSessions(user.userId)).toHaveLength(1);
    attacker.cookies.set('da_session', first!);
    expect((await attacker.get('/activate')).statusCode).toBe(303);
    expect(attacker.cookies.has('da_session')).toBe(false);
  });

  it('stores only the SHA-256 hash of the session cookie', async () => {
    const browser = await signedInBrowser(t, await seedUser(t));
    const cookie = browser.cookies.get('da_session')!;
    const rows = await t.deps.db.selectFrom('browser_sessions').selectAll().execute();
    // Mapped by hand: pg's Buffer has a toJSON that would hide the bytes from a JSON replacer.
    const stored = rows.map((row) => ({ ...row, session_hash: Buffer.from(row.session_hash).toString('hex') }));
    expect(JSON.stringify(stored)).not.toContain(cookie.slice('da_ss_'.length));
    expect(stored.map((row) => row.session_hash)).toContain(createHash('sha256').update(cookie).digest('hex'));
  });

  it('a session ends after SESSION_TTL', async () => {
    const browser = await signedInBrowser(t, await seedUser(t));
    t.clock.advance(t.config.sessionTtl - 1);
    expect((await browser.get('/activate')).statusCode).toBe(200);
    t.clock.advance(1);
    expect((await browser.get('/activate')).statusCode).toBe(303);
  });

  it('sign-out deletes the session; it needs the CSRF token', async () => {
    const user = await seedUser(t);
    const browser = await signedInBrowser(t, user);
    await browser.get('/activate');

    const forged = await browser.post('/signout', {}, { csrfToken: 'not-the-token' });
    expect(forged.statusCode).toBe(403);
    expect(await signedInSessions(user.userId)).toHaveLength(1);

    const res = await browser.post('/signout', {});
    expect(res.statusCode).toBe(303);
    expect(res.headers.location).toBe('/signin');
    expect(await signedInSessions(user.userId)).toHaveLength(0);
    expect(browser.cookies.has('da_session')).toBe(false);
    expect((await browser.get('/activate')).statusCode).toBe(303);
  });
});

describe('return_to (open-redirect defence)', () => {
  it.each([
    'https://evil.example/',
    '//evil.example/activate',
    '/\\evil.example/activate',
    'https:evil.example',
    'javascript:alert(1)',
    '/activate/../signout',
    '/activatex',
    '/signout',
    '',
  ])('return_to=%s is ignored: sign-in goes to /activate', async (returnTo) => {
    const user = await seedUser(t);
    const browser = new Browser(t);
    const page = await browser.get(`/signin?return_to=${encodeURIComponent(returnTo)}`);
    expect(inputValue(page.body, 'return_to')).toBe('/activate');
    const res = await browser.post('/signin', { email: user.email, password: user.password, return_to: returnTo });
    expect(res.statusCode).toBe(303);
    expect(res.headers.location).toBe('/activate');
  });

  it.each(['/activate/bot?user_code=BCDF-GHJK', '/account/devices', '/account'])('return_to=%s is kept', async (returnTo) => {
    const res = await signIn(new Browser(t), await seedUser(t), returnTo);
    expect(res.headers.location).toBe(returnTo);
  });
});

describe('page security headers', () => {
  it.each(['/signin', '/activate', '/activate/bot'])('%s: CSP with frame-ancestors none, no referrer, nosniff, no-store', async (url) => {
    const browser = new Browser(t);
    if (url !== '/signin') await signIn(browser, await seedUser(t));
    const res = await browser.get(url);
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-security-policy']).toContain("frame-ancestors 'none'");
    expect(res.headers['content-security-policy']).toContain("default-src 'none'");
    expect(res.headers['referrer-policy']).toBe('no-referrer');
    expect(res.headers['x-content-type-options']).toBe('nosniff');
    expect(res.headers['cache-control']).toBe('no-store');
  });
});
