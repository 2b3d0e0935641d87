import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Database } from '../../src/db/connect.js';
import { FORM, form, seedUser, startTestApp, type TestApp } from '../helpers/app.js';
import { Browser, inputValue, signedInBrowser } from '../helpers/browser.js';

let t: TestApp;

beforeAll(async () => {
  t = await startTestApp();
});
afterAll(() => t.close());

/**
 * Rows of every table in the schema, listed from information_schema so that a table added later
 * is counted too. The migrations' own bookkeeping is not written by page loads either, so nothing
 * is left out.
 */
async function rowsPerTable(db: Database): Promise<Record<string, number>> {
  const tables = await sql<{ table_name: string }>`
    SELECT table_name FROM information_schema.tables
    WHERE table_schema = 'public' AND table_type = 'BASE TABLE'
    ORDER BY table_name`.execute(db);
  const counts: Record<string, number> = {};
  for (const { table_name } of tables.rows) {
    const { rows } = await sql<{ n: string | number }>`SELECT count(*) AS n FROM ${sql.table(table_name)}`.execute(db);
    counts[table_name] = Number(rows[0]?.n);
  }
  return counts;
}

const browserSessionRows = async () => (await rowsPerTable(t.deps.db)).browser_sessions ?? Number.NaN;

const PAGE_LOADS = 10_000;
const AT_ONCE = 50;
const PAGES = ['/signin', '/activate', '/activate/bot', '/account/devices', '/account/apps', '/no-such-page'];

describe('anonymous visitors', () => {
  it(`${PAGE_LOADS} cookie-less page loads add no row to any table, within 60 s`, async () => {
    const before = await rowsPerTable(t.deps.db);
    expect(Object.keys(before)).toContain('browser_sessions');
    const started = Date.now();
    const statuses = new Map<number, number>();
    for (let sent = 0; sent < PAGE_LOADS; sent += AT_ONCE) {
      const batch = await Promise.all(Array.from({ length: AT_ONCE }, (_, i) => t.app.inject({ method: 'GET', url: PAGES[(sent + i) % PAGES.length]! })));
      for (const res of batch) statuses.set(res.statusCode, (statuses.get(res.statusCode) ?? 0) + 1);
    }
    const elapsedMs = Date.now() - started;
    const after = await rowsPerTable(t.deps.db);

    const added = Object.fromEntries(Object.entries(after).map(([table, n]) => [table, n - (before[table] ?? 0)]));
    expect(
      Object.values(added).filter((n) => n !== 0),
      JSON.stringify(added),
    ).toEqual([]);
    // The loads really were pages: sign-in forms, redirects to sign in, and the unknown page.
    expect([...statuses.keys()].sort()).toEqual([200, 303, 404]);
    expect(elapsedMs).toBeLessThan(60_000);
  }, 90_000);

  it('a visitor who keeps its anonymous cookie keeps its CSRF token; one without a cookie gets a new one', async () => {
    const visitor = new Browser(t);
    const first = await visitor.get('/signin');
    const cookie = first.cookies.find((c) => c.name === 'da_anon');
    expect(cookie?.value).toMatch(/^da_an_[A-Za-z0-9_-]{43}$/);
    const token = inputValue(first.body, 'csrf_token');
    expect(token).toMatch(/^[A-Za-z0-9_-]{43}$/);

    const again = await visitor.get('/signin');
    // Set once: a visitor who still has the cookie is not sent it again.
    expect(again.cookies).toEqual([]);
    expect(inputValue(again.body, 'csrf_token')).toBe(token);

    const stranger = await new Browser(t).get('/signin');
    expect(stranger.cookies.find((c) => c.name === 'da_anon')?.value).not.toBe(cookie?.value);
    expect(inputValue(stranger.body, 'csrf_token')).not.toBe(token);
  });

  it('the anonymous cookie is HttpOnly, SameSite=Lax, Path=/, lives as long as a session, and is not Secure over http', async () => {
    const res = await new Browser(t).get('/signin');
    const cookie = res.cookies.find((c) => c.name === 'da_anon');
    expect(cookie).toMatchObject({ httpOnly: true, sameSite: 'Lax', path: '/', maxAge: t.config.sessionTtl });
    expect(cookie?.secure).toBeUndefined();
  });

  it('a cookie naming no session (expired, or never issued) is cleared, and the visitor is anonymous with no row written', async () => {
    const rowsBefore = await browserSessionRows();
    const visitor = new Browser(t);
    visitor.cookies.set('da_session', `da_ss_${'a'.repeat(43)}`);
    const res = await visitor.get('/signin');
    expect(res.statusCode).toBe(200);
    expect(res.cookies.find((c) => c.name === 'da_session')?.maxAge).toBe(0);
    expect(visitor.cookies.has('da_session')).toBe(false);
    expect(visitor.cookies.get('da_anon')).toMatch(/^da_an_/);
    expect(await browserSessionRows()).toBe(rowsBefore);
  });

  it('sign-in with the anonymous form token writes exactly one session row, and swaps the anonymous cookie for a session cookie', async () => {
    const user = await seedUser(t);
    const visitor = new Browser(t);
    await visitor.get('/signin');
    const rowsBefore = await browserSessionRows();

    const res = await visitor.post('/signin', { email: user.email, password: user.password });
    expect(res.statusCode).toBe(303);
    expect(await browserSessionRows()).toBe(rowsBefore + 1);
    expect(res.cookies.find((c) => c.name === 'da_anon')?.maxAge).toBe(0);
    expect(visitor.cookies.has('da_anon')).toBe(false);
    expect(visitor.cookies.get('da_session')).toMatch(/^da_ss_/);
    expect((await visitor.get('/activate')).statusCode).toBe(200);
  });

  it('sign-out deletes the row and the browser is anonymous again, still without a row', async () => {
    const user = await seedUser(t);
    const browser = await signedInBrowser(t, user);
    await browser.get('/activate');
    const rowsSignedIn = await browserSessionRows();
    await browser.follow(await browser.post('/signout', {}));
    expect(browser.cookies.has('da_session')).toBe(false);
    expect(browser.cookies.get('da_anon')).toMatch(/^da_an_/);
    expect(await browserSessionRows()).toBe(rowsSignedIn - 1);
  });
});

describe('CSRF for anonymous forms (signed double submit)', () => {
  const post = (cookie: string | null, csrfToken: string | undefined, fields: Record<string, string>) =>
    t.app.inject({
      method: 'POST',
      url: '/signin',
      headers: { ...FORM, ...(cookie === null ? {} : { cookie }) },
      payload: form({ csrf_token: csrfToken, ...fields }),
    });

  async function anonymousVisitor() {
    const visitor = new Browser(t);
    await visitor.get('/signin');
    return { cookie: visitor.cookies.get('da_anon')!, token: visitor.csrfToken! };
  }

  async function signedInSession() {
    const browser = await signedInBrowser(t, await seedUser(t));
    await browser.get('/activate');
    return { cookie: browser.cookies.get('da_session')!, token: browser.csrfToken! };
  }

  const flipLastCharacter = (value: string) => value.slice(0, -1) + (value.endsWith('A') ? 'B' : 'A');

  it.each([
    ['without the anonymous cookie', async () => ({ cookie: null, token: (await anonymousVisitor()).token })],
    ['with no token', async () => ({ cookie: `da_anon=${(await anonymousVisitor()).cookie}`, token: undefined })],
    [
      "with the token of another visitor's cookie",
      async () => ({ cookie: `da_anon=${(await anonymousVisitor()).cookie}`, token: (await anonymousVisitor()).token }),
    ],
    [
      'with a tampered cookie',
      async () => {
        const visitor = await anonymousVisitor();
        return { cookie: `da_anon=${flipLastCharacter(visitor.cookie)}`, token: visitor.token };
      },
    ],
    [
      'with the cookie value itself as the token (the token is not the nonce)',
      async () => {
        const visitor = await anonymousVisitor();
        return { cookie: `da_anon=${visitor.cookie}`, token: visitor.cookie };
      },
    ],
    [
      "with a signed-in session's token and an anonymous cookie",
      async () => ({ cookie: `da_anon=${(await anonymousVisitor()).cookie}`, token: (await signedInSession()).token }),
    ],
    [
      "with a session cookie and another session's token",
      async () => ({ cookie: `da_session=${(await signedInSession()).cookie}`, token: (await signedInSession()).token }),
    ],
    [
      "with a session cookie and an anonymous visitor's token",
      async () => ({ cookie: `da_session=${(await signedInSession()).cookie}`, token: (await anonymousVisitor()).token }),
    ],
  ])('POST /signin %s is refused with 403 and writes nothing', async (_case, make) => {
    const user = await seedUser(t);
    const attempt = await make();
    const before = await rowsPerTable(t.deps.db);
    const res = await post(attempt.cookie, attempt.token, { email: user.email, password: user.password });
    expect(res.statusCode).toBe(403);
    expect(res.body).toContain('This form has expired');
    expect(res.cookies).toEqual([]);
    expect(await rowsPerTable(t.deps.db)).toEqual(before);
  });

  it.each([
    ['/activate', { user_code: 'BCDF-GHJK' }, '/signin?return_to=%2Factivate%3Fuser_code%3DBCDF-GHJK'],
    ['/activate/bot/decision', { user_code: 'BCDF-GHJK', request_handle: 'x', action: 'deny' }, '/signin?return_to=%2Factivate%2Fbot%3Fuser_code%3DBCDF-GHJK'],
    ['/account/devices/sign-out', { grant_id: '00000000-0000-4000-8000-000000000000' }, '/signin?return_to=%2Faccount%2Fdevices'],
    ['/account/apps/remove', { client_id: 'tv' }, '/signin?return_to=%2Faccount%2Fapps'],
  ])('POST %s with a valid anonymous token goes to sign-in and writes nothing', async (url, fields, location) => {
    const visitor = new Browser(t);
    await visitor.get('/signin');
    const before = await rowsPerTable(t.deps.db);
    const res = await visitor.post(url, fields);
    expect(res.statusCode).toBe(303);
    expect(res.headers.location).toBe(location);
    expect(await rowsPerTable(t.deps.db)).toEqual(before);
  });

  it('sign-out by an anonymous visitor with its valid token writes nothing and leaves it anonymous', async () => {
    const visitor = new Browser(t);
    await visitor.get('/signin');
    const before = await rowsPerTable(t.deps.db);
    const res = await visitor.post('/signout', {});
    expect(res.statusCode).toBe(303);
    expect(await rowsPerTable(t.deps.db)).toEqual(before);
  });
});
