import type net from 'node:net';
import fc from 'fast-check';
import type { LightMyRequestResponse as Response } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_URL_LENGTH } from '../src/http/plugins/strict-input.js';
import { FORM, seedClient, seedUser, startTestApp, type TestApp } from './helpers/app.js';
import { Browser, signIn } from './helpers/browser.js';

/**
 * What PostgreSQL cannot store (U+0000), what is not UTF-8 (a lone surrogate, an overlong form, a
 * cut sequence, a stray byte) and malformed escapes, sent in every parameter of every endpoint, in
 * HTTP Basic credentials and in cookies: never a 5xx, always a refusal, never a row written.
 */

let t: TestApp;
let tv: { clientId: string };
let bot: { clientId: string; clientSecret: string | null };
let browser: Browser;

beforeAll(async () => {
  t = await startTestApp();
  tv = await seedClient(t);
  bot = await seedClient(t, { kind: 'bot', type: 'confidential' });
  browser = new Browser(t);
  await browser.follow(await signIn(browser, await seedUser(t)));
});
afterAll(() => t.close());

const PERCENT_ENCODED = ['%00', '%ED%A0%80', '%ED%BF%BF', '%FF', '%C0%AF', '%E2%82', '%F4%90%80%80', '%', '%zz'];
const RAW_BYTES = [[0x00], [0xed, 0xa0, 0x80], [0xff], [0xc0, 0xaf], [0xe2, 0x82]];
const leading = fc.stringMatching(/^[A-Za-z0-9_-]{0,6}$/);
// Never starts with a hex digit: a bare "%" followed by "41" would be a good escape.
const trailing = fc.stringMatching(/^([G-Zg-z_-][A-Za-z0-9_-]{0,5})?$/);
const withAround = (hostile: fc.Arbitrary<Buffer>) =>
  fc.tuple(leading, hostile, trailing).map(([head, bytes, tail]) => Buffer.concat([Buffer.from(head), bytes, Buffer.from(tail)]));
/** Hostile bytes as a form would carry them: percent-encoded or raw. */
const hostileFormBytes = withAround(
  fc.oneof(
    fc.constantFrom(...PERCENT_ENCODED).map((s) => Buffer.from(s)),
    fc.constantFrom(...RAW_BYTES).map((b) => Buffer.from(b)),
  ),
);
/** In a URL only escapes get through: Node's HTTP parser answers 400 itself to raw bytes in a request line. */
const hostileUrlText = withAround(fc.constantFrom(...PERCENT_ENCODED).map((s) => Buffer.from(s))).map((b) => b.toString('latin1'));

/** A form whose one field (its value, or its name) is the hostile bytes; the rest is well formed. */
function formWith(fields: Record<string, string>, target: string, hostile: Buffer, inName: boolean): Buffer {
  const parts: Buffer[] = [];
  for (const [name, value] of Object.entries(fields)) {
    const encodedName = Buffer.from(encodeURIComponent(name));
    const encodedValue = Buffer.from(encodeURIComponent(value));
    if (name !== target) parts.push(Buffer.concat([encodedName, Buffer.from('='), encodedValue]));
    else parts.push(inName ? Buffer.concat([hostile, Buffer.from('='), encodedValue]) : Buffer.concat([encodedName, Buffer.from('='), hostile]));
  }
  return Buffer.concat(parts.flatMap((part, i) => (i === 0 ? [part] : [Buffer.from('&'), part])));
}

const PENDING_REQUEST = '00000000-0000-0000-0000-000000000000';
const OAUTH_FORMS: Record<string, () => Record<string, string>> = {
  '/oauth/device/code': () => ({
    client_id: tv.clientId,
    scope: 'openid profile',
    platform_name: 'Kitchen TV',
    platform_description: 'Model 7',
    platform_icon: 'https://example.test/tv.png',
  }),
  '/oauth/token': () => ({
    client_id: tv.clientId,
    grant_type: 'urn:ietf:params:oauth:grant-type:device_code',
    device_code: 'da_dc_unknown',
    refresh_token: 'da_rt_unknown',
    scope: 'openid',
  }),
  '/oauth/revoke': () => ({ client_id: tv.clientId, token: 'da_rt_unknown', token_type_hint: 'refresh_token' }),
  '/oauth/introspect': () => ({ client_id: tv.clientId, token: 'da_at_unknown', token_type_hint: 'access_token' }),
  '/oauth/userinfo': () => ({ claims: 'email' }),
};
const PAGE_FORMS: Record<string, () => Record<string, string>> = {
  '/signin': () => ({ email: 'someone@example.test', password: 'a password', return_to: '/account/devices' }),
  '/signout': () => ({ return_to: '/account/devices' }),
  '/activate': () => ({ user_code: 'BCDF-GHJK' }),
  '/activate/bot': () => ({ user_code: 'BCDF-GHJK' }),
  '/activate/decision': () => ({ user_code: 'BCDF-GHJK', request_handle: 'AAAAAAAAAAAAAAAAAAAAAA', action: 'approve', phrase: 'calm river' }),
  '/activate/bot/decision': () => ({ user_code: 'BCDF-GHJK', request_handle: 'AAAAAAAAAAAAAAAAAAAAAA', action: 'deny' }),
  '/account/devices/sign-out': () => ({ grant_id: PENDING_REQUEST }),
  '/account/devices/cancel': () => ({ request_id: '1' }),
  '/account/apps/remove': () => ({ client_id: tv.clientId }),
  '/logout': () => ({ client_id: tv.clientId, post_logout_redirect_uri: 'https://tv.example/bye', state: 's', ui_locales: 'de' }),
  '/logout/confirm': () => ({ client_id: tv.clientId, post_logout_redirect_uri: 'https://tv.example/bye', state: 's', ui_locales: 'de' }),
};
const GET_QUERIES: Record<string, string[]> = {
  '/activate': ['user_code'],
  '/activate/bot': ['user_code'],
  '/signin': ['return_to'],
  '/logout': ['id_token_hint', 'client_id', 'post_logout_redirect_uri', 'state', 'ui_locales'],
  '/account/devices': ['signed_out', 'cancelled'],
  '/account/apps': ['removed'],
  '/oauth/userinfo': ['schema'],
  '/.well-known/openid-configuration': ['x'],
  '/.well-known/jwks.json': ['x'],
  '/healthz': ['x'],
};

const isOAuthPath = (path: string) => path.startsWith('/oauth/') || path.startsWith('/.well-known/');

function expectRefusal(path: string, res: Response, status = 400, error = 'invalid_request') {
  expect(res.statusCode, `${path}: ${res.body.slice(0, 300)}`).toBe(status);
  if (isOAuthPath(path)) {
    expect(res.json()).toEqual({ error, error_description: expect.any(String) });
    expect(res.headers['cache-control']).toBe('no-store');
  } else {
    expect(res.headers['content-type']).toContain('text/html');
  }
}

async function rowCounts() {
  const tables = [
    'users',
    'clients',
    'browser_sessions',
    'device_requests',
    'grants',
    'refresh_tokens',
    'access_tokens',
    'events',
    'rate_limit_counters',
  ] as const;
  return Object.fromEntries(
    await Promise.all(
      tables.map(async (table) => [
        table,
        Number(
          (
            await t.deps.db
              .selectFrom(table)
              .select((eb) => eb.fn.countAll().as('n'))
              .executeTakeFirstOrThrow()
          ).n,
        ),
      ]),
    ),
  );
}

const browserCookie = () => [...browser.cookies].map(([name, value]) => `${name}=${value}`).join('; ');
const basicHeader = (id: Buffer, secret: Buffer) => `Basic ${Buffer.concat([id, Buffer.from(':'), secret]).toString('base64')}`;

describe('bytes the database cannot store are refused at the edge, on every channel', () => {
  it('OAuth endpoints: NUL, lone surrogates and invalid UTF-8 in any parameter (name or value) are invalid_request, nothing written', async () => {
    const before = await rowCounts();
    const request = fc.constantFrom(...Object.keys(OAUTH_FORMS)).chain((path) => {
      const fields = OAUTH_FORMS[path]!();
      return fc.record({
        path: fc.constant(path),
        fields: fc.constant(fields),
        target: fc.constantFrom(...Object.keys(fields)),
        bytes: hostileFormBytes,
        inName: fc.boolean(),
      });
    });
    await fc.assert(
      fc.asyncProperty(request, async ({ path, fields, target, bytes, inName }) => {
        const res = await t.app.inject({
          method: 'POST',
          url: path,
          headers: { ...FORM, authorization: 'Bearer da_at_unknown' },
          payload: formWith(fields, target, bytes, inName),
        });
        expectRefusal(path, res);
      }),
      { numRuns: 300 },
    );
    expect(await rowCounts()).toEqual(before);
  });

  it('pages: the same bytes in any field of a form with a valid session and CSRF token are a 400 page, nothing written', async () => {
    const before = await rowCounts();
    const request = fc.constantFrom(...Object.keys(PAGE_FORMS)).chain((path) => {
      const fields = { ...PAGE_FORMS[path]!(), csrf_token: browser.csrfToken! };
      return fc.record({
        path: fc.constant(path),
        fields: fc.constant(fields),
        target: fc.constantFrom(...Object.keys(fields)),
        bytes: hostileFormBytes,
        inName: fc.boolean(),
      });
    });
    await fc.assert(
      fc.asyncProperty(request, async ({ path, fields, target, bytes, inName }) => {
        const res = await t.app.inject({
          method: 'POST',
          url: path,
          headers: { ...FORM, cookie: browserCookie() },
          payload: formWith(fields, target, bytes, inName),
        });
        expectRefusal(path, res);
      }),
      { numRuns: 300 },
    );
    expect(await rowCounts()).toEqual(before);
  });

  it('query strings: the same escapes in any parameter of any GET are refused, before a session is started', async () => {
    const before = await rowCounts();
    const request = fc.constantFrom(...Object.keys(GET_QUERIES)).chain((path) =>
      fc.record({
        path: fc.constant(path),
        name: fc.constantFrom(...GET_QUERIES[path]!),
        text: hostileUrlText,
        inName: fc.boolean(),
        signedIn: fc.boolean(),
      }),
    );
    await fc.assert(
      fc.asyncProperty(request, async ({ path, name, text, inName, signedIn }) => {
        const query = inName ? `${text}=1` : `${name}=${text}`;
        const res = await t.app.inject({ method: 'GET', url: `${path}?${query}`, headers: signedIn ? { cookie: browserCookie() } : {} });
        expectRefusal(path, res);
      }),
      { numRuns: 200 },
    );
    expect(await rowCounts()).toEqual(before);
  });

  it('HTTP Basic: NUL, lone surrogates and invalid UTF-8 in the client id or secret are invalid_client, malformed HTTP Basic credentials', async () => {
    const before = await rowCounts();
    const bodies: Record<string, string> = {
      '/oauth/token': 'grant_type=refresh_token&refresh_token=da_rt_unknown',
      '/oauth/revoke': 'token=da_rt_unknown',
      '/oauth/introspect': 'token=da_at_unknown',
      '/oauth/device/code': 'scope=openid',
    };
    const credentials = fc.record({ path: fc.constantFrom(...Object.keys(bodies)), bytes: hostileFormBytes, inSecret: fc.boolean() });
    await fc.assert(
      fc.asyncProperty(credentials, async ({ path, bytes, inSecret }) => {
        const authorization = inSecret ? basicHeader(Buffer.from(bot.clientId), bytes) : basicHeader(bytes, Buffer.from(bot.clientSecret!));
        const res = await t.app.inject({ method: 'POST', url: path, headers: { ...FORM, authorization }, payload: bodies[path] });
        expectRefusal(path, res, 401, 'invalid_client');
        expect(res.json().error_description).toBe('malformed HTTP Basic credentials');
      }),
      { numRuns: 150 },
    );
    expect(await rowCounts()).toEqual(before);
  });

  it('cookies: a session cookie with odd bytes is no session, never a 5xx', async () => {
    const cookieText = fc.oneof(
      hostileUrlText,
      withAround(fc.constantFrom(...RAW_BYTES.slice(1)).map((b) => Buffer.from(b))).map((b) => b.toString('latin1')),
    );
    await fc.assert(
      fc.asyncProperty(cookieText, fc.boolean(), async (text, prefixed) => {
        const cookie = `da_session=${prefixed ? 'da_ss_' : ''}${text}`;
        const page = await t.app.inject({ method: 'GET', url: '/account/devices', headers: { cookie } });
        expect(page.statusCode).toBe(303);
        expect(page.headers.location).toBe('/signin?return_to=%2Faccount%2Fdevices');
        const post = await t.app.inject({
          method: 'POST',
          url: '/account/apps/remove',
          headers: { ...FORM, cookie },
          payload: `client_id=${tv.clientId}&csrf_token=${browser.csrfToken}`,
        });
        expect(post.statusCode).toBe(403);
      }),
      { numRuns: 60 },
    );
  });

  it('a NUL in client_id, once a 500 from PostgreSQL, is invalid_request', async () => {
    const res = await t.app.inject({ method: 'POST', url: '/oauth/device/code', headers: FORM, payload: 'client_id=tv%00' });
    expectRefusal('/oauth/device/code', res);
  });

  it('a NUL in the email on POST /signin, once a 500 from PostgreSQL, is a 400 page', async () => {
    const res = await t.app.inject({
      method: 'POST',
      url: '/signin',
      headers: { ...FORM, cookie: browserCookie() },
      payload: `email=a%00b%40example.test&password=x&csrf_token=${browser.csrfToken}`,
    });
    expectRefusal('/signin', res);
  });

  it('an escaped lone surrogate is refused, not kept as the text "%ED%A0%80"', async () => {
    const res = await t.app.inject({ method: 'POST', url: '/oauth/device/code', headers: FORM, payload: `client_id=${tv.clientId}&platform_name=%ED%A0%80` });
    expectRefusal('/oauth/device/code', res);
  });

  it('raw invalid UTF-8 in a body is refused, not turned into U+FFFD', async () => {
    const payload = Buffer.concat([Buffer.from(`client_id=${tv.clientId}&platform_description=caf`), Buffer.from([0xe9])]);
    const res = await t.app.inject({ method: 'POST', url: '/oauth/device/code', headers: FORM, payload });
    expectRefusal('/oauth/device/code', res);
    expect(res.json().error_description).toBe('the request body is not valid UTF-8');
  });

  it('well-formed UTF-8, raw or escaped, still passes', async () => {
    const payload = Buffer.from(`client_id=${tv.clientId}&platform_name=Caf%C3%A9+TV&platform_description=Salon d’été 🎬`);
    const res = await t.app.inject({ method: 'POST', url: '/oauth/device/code', headers: FORM, payload });
    expect(res.statusCode, res.body).toBe(200);
  });
});

describe('no unbounded value reaches a header', () => {
  it(`a request URL over ${MAX_URL_LENGTH} characters is 414 URI Too Long: invalid_request on /oauth/*, a page elsewhere`, async () => {
    const long = 'A'.repeat(MAX_URL_LENGTH);
    const oauth = await t.app.inject({ method: 'GET', url: `/.well-known/jwks.json?x=${long}` });
    expectRefusal('/.well-known/jwks.json', oauth, 414);
    const page = await t.app.inject({ method: 'GET', url: `/activate?user_code=${long}` });
    expectRefusal('/activate', page, 414);
    expect(page.headers.location).toBeUndefined();
  });

  it('GET /activate with a 14 KB query string is answered in a way fetch can read (no header overflow)', async () => {
    await t.app.listen({ host: '127.0.0.1', port: 0 });
    const { port } = t.app.server.address() as net.AddressInfo;
    const base = `http://127.0.0.1:${port}`;
    const huge = await fetch(`${base}/activate?user_code=${'A'.repeat(14 * 1024)}`, { redirect: 'manual', signal: AbortSignal.timeout(10_000) });
    expect(huge.status).toBe(414);
    expect(await huge.text()).toContain('<html');
    // Under the URL bound, a typed code too long to be a code is not carried into return_to.
    const long = await fetch(`${base}/activate?user_code=${'A'.repeat(4 * 1024)}`, { redirect: 'manual', signal: AbortSignal.timeout(10_000) });
    expect(long.status).toBe(303);
    expect(long.headers.get('location')).toBe('/signin?return_to=%2Factivate');
    const typed = await fetch(`${base}/activate/bot?user_code=bcdf-ghjk`, { redirect: 'manual', signal: AbortSignal.timeout(10_000) });
    expect(typed.headers.get('location')).toBe('/signin?return_to=%2Factivate%2Fbot%3Fuser_code%3Dbcdf-ghjk');
  });

  it('a long typed code in an anonymous POST /activate is not carried into the redirect', async () => {
    const anonymous = new Browser(t);
    await anonymous.get('/signin');
    const res = await anonymous.post('/activate', { user_code: 'B'.repeat(20_000) });
    expect(res.statusCode).toBe(303);
    expect(res.headers.location).toBe('/signin?return_to=%2Factivate');
  });

  it('a return address over 1024 characters, before or after re-encoding, falls back to /activate', async () => {
    for (const returnTo of [`/account/devices?x=${'a'.repeat(1100)}`, `/account/devices?x=${'é'.repeat(300)}`]) {
      const res = await browser.get(`/signin?return_to=${encodeURIComponent(returnTo)}`);
      expect(res.statusCode).toBe(303);
      expect(res.headers.location).toBe('/activate');
    }
    const kept = await browser.get(`/signin?return_to=${encodeURIComponent('/account/devices?x=é')}`);
    expect(kept.headers.location).toBe('/account/devices?x=%C3%A9');
  });
});
