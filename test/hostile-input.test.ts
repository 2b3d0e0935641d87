import fc from 'fast-check';
import type { LightMyRequestResponse as Response } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basicAuth, seedClient, seedUser, startTestApp, type TestApp } from './helpers/app.js';
import { Browser, signIn } from './helpers/browser.js';

let t: TestApp;
let tv: { clientId: string };
let bot: { clientId: string; clientSecret: string | null };
let browser: Browser;

beforeAll(async () => {
  t = await startTestApp();
  tv = await seedClient(t);
  bot = await seedClient(t, { kind: 'bot', type: 'confidential' });
  const user = await seedUser(t);
  browser = new Browser(t);
  await browser.follow(await signIn(browser, user));
});
afterAll(() => t.close());

const OAUTH_POSTS = ['/oauth/device/code', '/oauth/token', '/oauth/revoke', '/oauth/introspect', '/oauth/userinfo'];
const PAGE_POSTS = [
  '/signin',
  '/signout',
  '/activate',
  '/activate/bot',
  '/activate/decision',
  '/activate/bot/decision',
  '/account/devices/sign-out',
  '/account/devices/cancel',
  '/account/apps/remove',
];
const GETS = [
  '/activate',
  '/activate/bot',
  '/signin',
  '/oauth/userinfo',
  '/.well-known/openid-configuration',
  '/.well-known/jwks.json',
  '/account/devices',
  '/account/apps',
  '/healthz',
  '/nothing/here',
];
const PARAMETER_NAMES = [
  'client_id',
  'client_secret',
  'grant_type',
  'device_code',
  'refresh_token',
  'scope',
  'token',
  'token_type_hint',
  'user_code',
  'platform_name',
  'platform_description',
  'platform_icon',
  'email',
  'password',
  'return_to',
  'csrf_token',
  'phrase',
  'action',
  'request_id',
  'grant_id',
  '__proto__',
  'constructor',
  '',
];

const parameterName = fc.oneof(fc.constantFrom(...PARAMETER_NAMES), fc.string({ maxLength: 20 }));
const parameterValue = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.string({ unit: 'grapheme', maxLength: 40 }),
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.constantFrom(
    'urn:ietf:params:oauth:grant-type:device_code',
    'refresh_token',
    'approve',
    'deny',
    'da_at_x',
    'da_rt_x',
    'da_dc_x',
    'BCDF-GHJK',
    '00000000-0000-0000-0000-000000000000',
    'not-a-uuid',
  ),
  fc.nat().map(String),
  fc.constant('x'.repeat(5000)),
);
/** Form bodies with missing, repeated, oversized, and wrongly typed parameters, some with real client ids. */
const formBody = fc
  .array(fc.tuple(parameterName, parameterValue), { maxLength: 8 })
  .chain((pairs) =>
    fc.record({
      pairs: fc.constant(pairs),
      repeat: fc.boolean(),
      realClient: fc.constantFrom<'none' | 'tv' | 'bot'>('none', 'tv', 'bot'),
    }),
  )
  .map(({ pairs, repeat, realClient }) => {
    const params = new URLSearchParams();
    if (realClient !== 'none') params.append('client_id', realClient === 'tv' ? tv.clientId : bot.clientId);
    for (const [name, value] of pairs) params.append(name, value);
    if (repeat && pairs[0]) params.append(pairs[0][0], pairs[0][1]);
    return params.toString();
  });

/** Bodies that are not a well-formed form at all. */
const strangeBody = fc.oneof(
  fc.record({ type: fc.constant('application/json'), body: fc.json() }),
  fc.record({
    type: fc.constant('multipart/form-data; boundary=x'),
    body: fc.constant('--x\r\nContent-Disposition: form-data; name="client_id"\r\n\r\nabc\r\n--x--\r\n'),
  }),
  fc.record({ type: fc.constant('text/plain'), body: fc.string() }),
  fc.record({
    type: fc.constant('application/x-www-form-urlencoded'),
    body: fc.constantFrom('%FF%FE=%C0%AF', 'client_id=%E0%80', 'a=%', '=&=&&', 'platform_name=%ED%A0%80'),
  }),
  fc.record({ type: fc.constant('application/x-www-form-urlencoded'), body: fc.constant(`platform_name=${'x'.repeat(70 * 1024)}`) }),
  fc.record({ type: fc.constant('application/xml'), body: fc.constant('<a/>') }),
  fc.record({ type: fc.constant(''), body: fc.constant('') }),
);

const oddHeaders = fc.record(
  {
    authorization: fc.oneof(
      fc.constant('Basic'),
      fc.constant('Basic !!!not-base64'),
      fc.base64String({ maxLength: 40 }).map((b) => `Basic ${b}`),
      fc.string({ maxLength: 30 }).map((s) => `Bearer ${s}`),
      fc.constant(basicAuth('nobody', 'wrong')),
      fc.constant(`Basic ${Buffer.from('no-colon').toString('base64')}`),
      fc.constant(`Basic ${Buffer.from('%zz:%zz').toString('base64')}`),
      fc.constant(`Bearer da_at_${'a'.repeat(5000)}`),
    ),
    host: fc.constantFrom('evil.example', 'localhost:1', '[::1]'),
    'x-forwarded-for': fc.constantFrom('not-an-ip', '1.2.3.4, 5.6.7.8', ''),
    cookie: fc.constantFrom(
      'da_session=garbage',
      'da_session=',
      '=;;=',
      `da_session=da_ss_${'a'.repeat(43)}`,
      'da_anon=garbage',
      `da_anon=da_an_${'%00'.repeat(43)}`,
      `da_anon=da_an_%ED%A0%80${'a'.repeat(40)}`,
      `da_anon=da_an_${'a'.repeat(5000)}`,
    ),
    accept: fc.constantFrom('application/json', '*/*', 'text/html'),
  },
  { requiredKeys: [] },
);

function expectProperAnswer(path: string, res: Response) {
  expect(res.statusCode, `${path}: ${res.body.slice(0, 200)}`).toBeLessThan(500);
  if (res.statusCode < 400) return;
  if (path.startsWith('/oauth/') || path.startsWith('/.well-known/')) {
    const body = res.json();
    expect(typeof body.error).toBe('string');
    expect(typeof body.error_description).toBe('string');
  } else {
    expect(res.headers['content-type']).toContain('text/html');
  }
}

const counts = async () => {
  const tables = ['device_requests', 'grants', 'refresh_tokens', 'access_tokens', 'events'] as const;
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
};

describe('hostile input: every endpoint answers 4xx with a proper error, never a 500, never a partial write', () => {
  it('OAuth endpoints, fed generated forms, bodies and headers', async () => {
    const before = await counts();
    let deviceCodesIssued = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...OAUTH_POSTS),
        fc.oneof(
          formBody.map((body) => ({ type: 'application/x-www-form-urlencoded', body })),
          strangeBody,
        ),
        oddHeaders,
        async (path, { type, body }, headers) => {
          const res = await t.app.inject({ method: 'POST', url: path, headers: { ...headers, ...(type ? { 'content-type': type } : {}) }, payload: body });
          expectProperAnswer(path, res);
          if (path === '/oauth/device/code' && res.statusCode === 200) deviceCodesIssued++;
          if (path.startsWith('/oauth/') && res.statusCode >= 400) expect(res.headers['cache-control']).toBe('no-store');
        },
      ),
      { numRuns: 400 },
    );
    const after = await counts();
    // The only writes: device requests that were answered 200, each with its device_request.created event.
    expect(after).toEqual({ ...before, device_requests: before.device_requests + deviceCodesIssued, events: before.events + deviceCodesIssued });
  });

  it('pages, fed generated forms by a signed-in browser with a valid CSRF token, and anonymous ones', async () => {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...PAGE_POSTS), formBody, fc.boolean(), async (path, body, withSession) => {
        const params = new URLSearchParams(body);
        let res: Response;
        if (withSession) {
          res = await browser.post(path, Object.fromEntries(params));
          // A sign-out ends the session: sign in again for the next run.
          if (path === '/signout') await browser.follow(await signIn(browser, await seedUser(t)));
        } else {
          res = await t.app.inject({ method: 'POST', url: path, headers: { 'content-type': 'application/x-www-form-urlencoded' }, payload: body });
        }
        expectProperAnswer(path, res);
      }),
      { numRuns: 250 },
    );
  });

  it('GET endpoints with odd query strings and headers', async () => {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...GETS), formBody, oddHeaders, async (path, query, headers) => {
        const res = await t.app.inject({ method: 'GET', url: `${path}?${query}`, headers });
        expectProperAnswer(path, res);
      }),
      { numRuns: 250 },
    );
  });

  it('JSON, multipart and text bodies are refused with 415 invalid_request (RFC 6749 §3.2 wants a form)', async () => {
    for (const type of ['application/json', 'multipart/form-data; boundary=x', 'text/plain']) {
      const res = await t.app.inject({ method: 'POST', url: '/oauth/device/code', headers: { 'content-type': type }, payload: '{"client_id":"x"}' });
      expect(res.statusCode).toBe(415);
      expect(res.json().error).toBe('invalid_request');
    }
  });

  it('a body over the limit is 413 with an OAuth error', async () => {
    const res = await t.app.inject({
      method: 'POST',
      url: '/oauth/token',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      payload: `device_code=${'a'.repeat(70 * 1024)}`,
    });
    expect(res.statusCode).toBe(413);
    expect(res.json().error).toBe('invalid_request');
  });

  it.each(['token', 'access_token', 'refresh_token', 'device_code', 'client_secret'])(
    'RFC 6750 §2.3: %s in the URL of an OAuth request is refused',
    async (name) => {
      const res = await t.app.inject({
        method: 'POST',
        url: `/oauth/revoke?${name}=da_at_secret`,
        headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: basicAuth(bot.clientId, bot.clientSecret!) },
        payload: 'token=x',
      });
      expect(res.statusCode).toBe(400);
      expect(res.json().error).toBe('invalid_request');
      expect(res.json().error_description).toContain(name);
    },
  );

  it('no URL is ever built from the Host header', async () => {
    const headers = { host: 'evil.example', 'x-forwarded-host': 'evil.example' };
    const meta = await t.app.inject({ method: 'GET', url: '/.well-known/openid-configuration', headers });
    expect(meta.body).not.toContain('evil.example');
    const code = await t.app.inject({
      method: 'POST',
      url: '/oauth/device/code',
      headers: { ...headers, 'content-type': 'application/x-www-form-urlencoded' },
      payload: `client_id=${tv.clientId}`,
    });
    expect(code.json().verification_uri).toBe('http://localhost:3000/activate');
    const redirect = await t.app.inject({ method: 'GET', url: '/activate', headers });
    expect(redirect.headers.location).toMatch(/^\/signin/);
  });

  it('pages send a strict Content-Security-Policy, frame-ancestors none, no referrer and nosniff', async () => {
    const anonymous = new Browser(t);
    for (const [path, as] of [
      ['/signin', anonymous],
      ['/activate', browser],
      ['/account/devices', browser],
      ['/nothing', browser],
    ] as const) {
      const res = await as.get(path);
      expect(res.headers['content-type']).toContain('text/html');
      expect(res.headers['content-security-policy']).toContain("default-src 'none'");
      expect(res.headers['content-security-policy']).toContain("frame-ancestors 'none'");
      expect(res.headers['content-security-policy']).not.toContain('unsafe-inline');
      expect(res.headers['referrer-policy']).toBe('no-referrer');
      expect(res.headers['x-content-type-options']).toBe('nosniff');
      expect(res.headers['x-frame-options']).toBe('DENY');
    }
  });
});
