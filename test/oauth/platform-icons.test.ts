import { createHash } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { signOutDevice } from '../../src/accounts/devices.js';
import { purgeExpired } from '../../src/housekeeping/purge.js';
import { ICON_MAX_BYTES } from '../../src/oauth/device/icon-fetch.js';
import { seedClient, seedUser, startTestApp, type TestApp } from '../helpers/app.js';
import { type Browser, signedInBrowser } from '../helpers/browser.js';
import { decide, poll, requestDeviceCode, startDeviceFlow } from '../helpers/device.js';
import { fetchingFrom, ICON_HOST, ICON_PNG, pngHandler, redirectTo, startIconServer, type IconServer } from '../helpers/icon-server.js';

let server: IconServer;

beforeAll(async () => {
  server = await startIconServer();
});
afterAll(() => server.close());

const sha256Hex = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');
const ICON_PATH = `/icons/${sha256Hex(ICON_PNG)}`;

/** An app fetching from the test's icon server, with a TV app and a signed-in browser. */
function appFetchingIcons(env: Record<string, string> = {}) {
  const state = {} as { t: TestApp; tv: { clientId: string }; browser: Browser; user: Awaited<ReturnType<typeof seedUser>> };
  beforeAll(async () => {
    const fetching = fetchingFrom(server);
    state.t = await startTestApp({ ...fetching, env: { ...fetching.env, ...env } });
    state.tv = await seedClient(state.t, { kind: 'tv', name: 'Living Room TV' });
    state.user = await seedUser(state.t);
    state.browser = await signedInBrowser(state.t, state.user);
  });
  afterAll(() => state.t.close());
  return state;
}

/** Requests a code with this icon URL and waits until the server has stored the icon or given up. */
async function requestWithIcon(t: TestApp, clientId: string, iconUrl: string) {
  const started = await startDeviceFlow(t, clientId, { platform_icon: iconUrl });
  await t.deps.platformIcons.settled();
  return started;
}

/** The src of the icon on the approval page of `userCode`, or null when the page shows none. */
async function iconOnApprovalPage(browser: Browser, userCode: string): Promise<string | null> {
  await browser.get('/activate');
  const page = await browser.post('/activate', { user_code: userCode });
  expect(page.statusCode, page.body).toBe(200);
  expect(page.body).toContain('Which phrase does your device show?');
  return /<img [^>]*src="([^"]*)"/.exec(page.body)?.[1] ?? null;
}

/** How many times each outcome of an icon fetch was counted. */
async function outcomes(t: TestApp): Promise<Record<string, number>> {
  const metric = await t.deps.metrics.platformIconFetches.get();
  return Object.fromEntries(metric.values.map((v) => [String(v.labels.outcome), v.value]));
}

/** The outcomes counted while `run` ran. */
async function outcomesOf(t: TestApp, run: () => Promise<unknown>): Promise<Record<string, number>> {
  const before = await outcomes(t);
  await run();
  const after = await outcomes(t);
  return Object.fromEntries(
    Object.entries(after)
      .filter(([name, n]) => n !== (before[name] ?? 0))
      .map(([name, n]) => [name, n - (before[name] ?? 0)]),
  );
}

const storedIcons = async (t: TestApp) =>
  Number(
    (
      await t.deps.db
        .selectFrom('platform_icons')
        .select((eb) => eb.fn.countAll().as('n'))
        .executeTakeFirstOrThrow()
    ).n,
  );

/** Answers hang until the test lets them go (or the server closes). */
function heldResponses() {
  const held: ServerResponse[] = [];
  return {
    held,
    handler: (_request: unknown, response: ServerResponse) => void held.push(response),
  };
}

beforeEach(() => {
  server.requests.length = 0;
});

describe('the platform icon is fetched by the server and served from its own origin', () => {
  const s = appFetchingIcons();

  it('fetched once from the device host, stored, and shown from /icons/<sha256> on our origin', async () => {
    server.route('/tv.png', pngHandler);
    const iconUrl = server.url('/tv.png?size=48');
    const { user_code } = await requestWithIcon(s.t, s.tv.clientId, iconUrl);

    const src = await iconOnApprovalPage(s.browser, user_code);
    expect(src).toBe(ICON_PATH);
    const page = await s.browser.post('/activate', { user_code });
    expect(page.body).not.toContain(ICON_HOST);
    expect(page.body).toMatch(/<img [^>]*> <span class="unverified">Unverified<\/span>/);

    const icon = await s.t.app.inject({ method: 'GET', url: ICON_PATH });
    expect(icon.statusCode).toBe(200);
    expect(icon.rawPayload.equals(ICON_PNG)).toBe(true);
    expect(icon.headers['content-type']).toBe('image/png');
    expect(icon.headers['x-content-type-options']).toBe('nosniff');
    expect(icon.headers['content-security-policy']).toBe("default-src 'none'; sandbox");
    expect(icon.headers['cache-control']).toBe('public, max-age=31536000, immutable');

    // The device's host heard from the server once, as the server: never the user's browser.
    expect(server.requests).toHaveLength(1);
    const [request] = server.requests;
    expect(request?.path).toBe('/tv.png?size=48');
    expect(request?.headers['user-agent']).toBe('device-auth-icon-fetcher/1 (+http://localhost:3000)');
    expect(request?.headers.host).toBe(`${ICON_HOST}:${server.port}`);
    expect(request?.headers.cookie).toBeUndefined();
    expect(request?.headers.authorization).toBeUndefined();
    expect(request?.headers.referer).toBeUndefined();
  });

  it('the same icon URL requested again within the hour reuses the stored image: the host sees one request', async () => {
    server.route('/again.png', pngHandler);
    const iconUrl = server.url('/again.png');
    const first = await requestWithIcon(s.t, s.tv.clientId, iconUrl);
    // Two more at once: neither fetches again.
    const [second, third] = await Promise.all([
      startDeviceFlow(s.t, s.tv.clientId, { platform_icon: iconUrl }),
      startDeviceFlow(s.t, s.tv.clientId, { platform_icon: iconUrl }),
    ]);
    await s.t.deps.platformIcons.settled();
    for (const { user_code } of [first, second, third]) expect(await iconOnApprovalPage(s.browser, user_code)).toBe(ICON_PATH);
    expect(server.requests.filter((r) => r.path === '/again.png')).toHaveLength(1);
    // One picture, one row, whatever URLs and requests name it.
    const rows = await s.t.deps.db.selectFrom('platform_icons').select('sha256').execute();
    expect(rows.map((row) => Buffer.from(row.sha256).toString('hex'))).toEqual([sha256Hex(ICON_PNG)]);
  });

  it('requests for one URL sent at once share one fetch', async () => {
    server.route('/burst.png', pngHandler);
    const iconUrl = server.url('/burst.png');
    const started = await Promise.all(Array.from({ length: 5 }, () => startDeviceFlow(s.t, s.tv.clientId, { platform_icon: iconUrl })));
    await s.t.deps.platformIcons.settled();
    for (const { user_code } of started) expect(await iconOnApprovalPage(s.browser, user_code)).toBe(ICON_PATH);
    expect(server.requests.filter((r) => r.path === '/burst.png')).toHaveLength(1);
  });

  it('the device gets its code without waiting for the icon host, and the page shows the icon once it is stored', async () => {
    const { held, handler } = heldResponses();
    server.route('/held.png', handler);
    const started = await startDeviceFlow(s.t, s.tv.clientId, { platform_icon: server.url('/held.png') });
    // Answered while the icon host has not answered: the page has no icon yet.
    expect(await iconOnApprovalPage(s.browser, started.user_code)).toBeNull();
    for (let waited = 0; held.length === 0 && waited < 100; waited++) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(held).toHaveLength(1);
    held[0]?.writeHead(200, { 'content-type': 'image/png' }).end(ICON_PNG);
    await s.t.deps.platformIcons.settled();
    expect(await iconOnApprovalPage(s.browser, started.user_code)).toBe(ICON_PATH);
  });

  it('an icon of exactly 64 KB is stored, and a JPEG, GIF, WebP and ICO too', async () => {
    const png = Buffer.concat([ICON_PNG, Buffer.alloc(ICON_MAX_BYTES - ICON_PNG.length)]);
    const images: [string, string, Buffer][] = [
      ['/64k.png', 'image/png', png],
      ['/photo.jpg', 'image/jpeg', Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0, 0x10, 0x4a, 0x46])],
      ['/anim.gif', 'image/gif', Buffer.from('GIF89a\x01\x00\x01\x00', 'latin1')],
      ['/tv.webp', 'image/webp', Buffer.concat([Buffer.from('RIFF'), Buffer.from([4, 0, 0, 0]), Buffer.from('WEBPVP8 ')])],
      ['/favicon.ico', 'image/vnd.microsoft.icon', Buffer.from([0, 0, 1, 0, 1, 0, 16, 16])],
    ];
    for (const [path, type, bytes] of images) {
      server.route(path, (_request, response) => response.writeHead(200, { 'content-type': type }).end(bytes));
      const { user_code } = await requestWithIcon(s.t, s.tv.clientId, server.url(path));
      expect(await iconOnApprovalPage(s.browser, user_code), path).toBe(`/icons/${sha256Hex(bytes)}`);
      const served = await s.t.app.inject({ method: 'GET', url: `/icons/${sha256Hex(bytes)}` });
      expect(served.rawPayload.equals(bytes)).toBe(true);
      expect(served.headers['content-type']).toBe(type === 'image/vnd.microsoft.icon' ? 'image/x-icon' : type);
    }
  });

  it('three redirects are followed, each to a checked address', async () => {
    server.route('/r1', redirectTo('/r2'));
    server.route('/r2', redirectTo(server.url('/r3', `cdn.${ICON_HOST}`), 301));
    server.route('/r3', redirectTo('/tv.png', 307));
    server.route('/tv.png', pngHandler);
    server.names.set(`cdn.${ICON_HOST}`, ['127.0.0.1']);
    const { user_code } = await requestWithIcon(s.t, s.tv.clientId, server.url('/r1'));
    expect(await iconOnApprovalPage(s.browser, user_code)).toBe(ICON_PATH);
    expect(server.requests.map((r) => [r.path, r.headers.host])).toEqual([
      ['/r1', `${ICON_HOST}:${server.port}`],
      ['/r2', `${ICON_HOST}:${server.port}`],
      ['/r3', `cdn.${ICON_HOST}:${server.port}`],
      ['/tv.png', `cdn.${ICON_HOST}:${server.port}`],
    ]);
  });

  it('DNS rebinding finds nothing to rebind: the name is resolved once, and the connection goes to the address that was checked', async () => {
    server.route('/rebind.png', pngHandler);
    const host = `rebind.${ICON_HOST}`;
    // The first answer is allowed; any later one would point into the private network.
    let answers = 0;
    server.names.set(host, () => (answers++ === 0 ? ['127.0.0.1'] : ['10.0.0.1']));
    server.resolutions.length = 0;
    const { user_code } = await requestWithIcon(s.t, s.tv.clientId, server.url('/rebind.png', host));
    expect(await iconOnApprovalPage(s.browser, user_code)).toBe(ICON_PATH);
    expect(server.resolutions).toEqual([host]);
    // The certificate was checked against the name, sent by SNI: the host header names it too.
    expect(server.requests.map((r) => r.headers.host)).toEqual([`${host}:${server.port}`]);
  });

  it('/icons answers 404 for an icon it does not have, and for any other name', async () => {
    for (const name of ['0'.repeat(64), sha256Hex(ICON_PNG).toUpperCase(), sha256Hex(ICON_PNG).slice(1), 'tv.png', `${sha256Hex(ICON_PNG)}.png`]) {
      const res = await s.t.app.inject({ method: 'GET', url: `/icons/${name}` });
      expect(res.statusCode, name).toBe(404);
      expect(res.headers['cache-control']).toBe('no-store');
    }
  });
});

describe('a refused icon: no icon, and the device request still succeeds', () => {
  const s = appFetchingIcons();

  beforeAll(() => {
    const big = Buffer.concat([ICON_PNG, Buffer.alloc(ICON_MAX_BYTES + 1 - ICON_PNG.length)]);
    server.route('/big.png', (_request, response) => response.writeHead(200, { 'content-type': 'image/png', 'content-length': big.length }).end(big));
    // No length announced: the fetcher must stop reading by itself.
    server.route('/big-chunked.png', (_request, response) => {
      response.writeHead(200, { 'content-type': 'image/png' });
      for (let i = 0; i < 40; i++) response.write(Buffer.alloc(4096, i === 0 ? 0x89 : 0));
      response.end();
    });
    server.route('/page.html', (_request, response) => response.writeHead(200, { 'content-type': 'text/html' }).end('<html>hi</html>'));
    server.route('/html-as.png', (_request, response) => response.writeHead(200, { 'content-type': 'image/png' }).end('<html>hi</html>'));
    server.route('/png-as-text', (_request, response) => response.writeHead(200, { 'content-type': 'text/plain' }).end(ICON_PNG));
    server.route('/logo.svg', (_request, response) =>
      response.writeHead(200, { 'content-type': 'image/svg+xml' }).end('<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>'),
    );
    server.route('/gzipped.png', (_request, response) => response.writeHead(200, { 'content-type': 'image/png', 'content-encoding': 'gzip' }).end(ICON_PNG));
    server.route('/missing.png', (_request, response) => response.writeHead(404).end());
    server.route('/to-http', redirectTo(`http://${ICON_HOST}:${server.port}/tv.png`));
    server.route('/to-private', redirectTo('https://10.1.2.3/tv.png'));
    server.route('/to-metadata', redirectTo('https://169.254.169.254/latest/meta-data/'));
    server.route('/to-lan-name', redirectTo(server.url('/tv.png', `lan.${ICON_HOST}`)));
    server.route('/to-credentials', redirectTo(`https://user:secret@${ICON_HOST}:${server.port}/tv.png`));
    for (const n of [1, 2, 3, 4]) server.route(`/hop${n}`, redirectTo(n < 4 ? `/hop${n + 1}` : '/tv.png'));
    server.route('/hop5', redirectTo('/hop1'));
    server.route('/tv.png', pngHandler);
    server.names.set(`lan.${ICON_HOST}`, ['192.168.1.20']);
    server.names.set(`cgnat.${ICON_HOST}`, ['100.64.0.9']);
    server.names.set(`ula.${ICON_HOST}`, ['fd12:3456::1']);
    server.names.set(`mapped.${ICON_HOST}`, ['::ffff:10.0.0.1']);
    // One public address (loopback, relaxed for this test) and one private: every address must be public.
    server.names.set(`mixed.${ICON_HOST}`, ['127.0.0.1', '10.0.0.1']);
  });

  it.each([
    ['larger than 64 KB (by its Content-Length)', '/big.png', 'too_large'],
    ['larger than 64 KB (no length given)', '/big-chunked.png', 'too_large'],
    ['not an image (text/html)', '/page.html', 'not_an_image'],
    ['HTML sent as image/png', '/html-as.png', 'not_an_image'],
    ['a PNG sent as text/plain', '/png-as-text', 'not_an_image'],
    ['an SVG (it can carry script)', '/logo.svg', 'not_an_image'],
    ['compressed (never decompressed)', '/gzipped.png', 'not_an_image'],
    ['a 404', '/missing.png', 'http_status'],
    ['redirected to http://', '/to-http', 'not_https'],
    ['redirected to a private address', '/to-private', 'not_public'],
    ['redirected to the link-local metadata address', '/to-metadata', 'not_public'],
    ['redirected to a name resolving to a private address', '/to-lan-name', 'not_public'],
    ['redirected to a URL with credentials', '/to-credentials', 'credentials'],
    ['redirected four times', '/hop1', 'too_many_redirects'],
    ['redirected in a loop', '/hop5', 'too_many_redirects'],
  ])('%s', async (_case, path, refusal) => {
    let started: Awaited<ReturnType<typeof requestWithIcon>> | undefined;
    expect(await outcomesOf(s.t, async () => (started = await requestWithIcon(s.t, s.tv.clientId, server.url(path))))).toEqual({ [refusal]: 1 });
    expect(await iconOnApprovalPage(s.browser, started!.user_code)).toBeNull();
    expect(await storedIcons(s.t)).toBe(0);
    // Nothing was fetched from where a redirect pointed.
    expect(server.requests.map((r) => r.path).filter((p) => p === '/tv.png')).toEqual([]);
  });

  it.each([
    ['a name resolving to a private address', () => server.url('/tv.png', `lan.${ICON_HOST}`)],
    ['a name resolving to a carrier-grade NAT address', () => server.url('/tv.png', `cgnat.${ICON_HOST}`)],
    ['a name resolving to a unique-local IPv6 address', () => server.url('/tv.png', `ula.${ICON_HOST}`)],
    ['a name resolving to an IPv4-mapped private address', () => server.url('/tv.png', `mapped.${ICON_HOST}`)],
    ['a name with one private address among allowed ones', () => server.url('/tv.png', `mixed.${ICON_HOST}`)],
    ['a private address', () => 'https://10.0.0.1/tv.png'],
    ['the link-local metadata address', () => 'https://169.254.169.254/latest/meta-data/'],
    ['an IPv6 link-local address', () => 'https://[fe80::1]/tv.png'],
    ['an IPv4-mapped private address', () => 'https://[::ffff:192.168.0.1]/tv.png'],
  ])('%s: refused before any connection', async (_case, url) => {
    let started: Awaited<ReturnType<typeof requestWithIcon>> | undefined;
    expect(await outcomesOf(s.t, async () => (started = await requestWithIcon(s.t, s.tv.clientId, url())))).toEqual({ not_public: 1 });
    expect(await iconOnApprovalPage(s.browser, started!.user_code)).toBeNull();
    expect(server.requests).toEqual([]);
  });

  it('a name that does not resolve', async () => {
    expect(await outcomesOf(s.t, () => requestWithIcon(s.t, s.tv.clientId, `https://nowhere.${ICON_HOST}/tv.png`))).toEqual({ not_resolved: 1 });
  });

  it.each([
    ['never answers', '/silent.png', false],
    ['sends its headers, then trickles forever', '/trickle.png', true],
  ])('a host that %s is given up after 2 s', async (_case, path, startsAnswering) => {
    const { held, handler } = heldResponses();
    server.route(path, (request, response) => {
      handler(request, response);
      if (startsAnswering) response.writeHead(200, { 'content-type': 'image/png' }).write(ICON_PNG.subarray(0, 8));
    });
    const startedAt = Date.now();
    let started: Awaited<ReturnType<typeof requestWithIcon>> | undefined;
    expect(await outcomesOf(s.t, async () => (started = await requestWithIcon(s.t, s.tv.clientId, server.url(path))))).toEqual({ timeout: 1 });
    const waited = Date.now() - startedAt;
    expect(waited).toBeGreaterThanOrEqual(1900);
    expect(waited).toBeLessThan(5000);
    expect(held).toHaveLength(1);
    expect(await iconOnApprovalPage(s.browser, started!.user_code)).toBeNull();
  });

  it('a certificate the server does not trust', async () => {
    const untrusting = await startTestApp({ env: { ICON_FETCH_ALLOW_LOOPBACK: 'true' }, iconFetching: { resolve: server.resolve } });
    try {
      const tv = await seedClient(untrusting, { kind: 'tv' });
      expect(await outcomesOf(untrusting, () => requestWithIcon(untrusting, tv.clientId, server.url('/tv.png')))).toEqual({ connection_failed: 1 });
      expect(server.requests).toEqual([]);
    } finally {
      await untrusting.close();
    }
  });

  it("a certificate that does not name the URL's host, though it names the address connected to", async () => {
    server.names.set('elsewhere.test', ['127.0.0.1']);
    const url = `https://elsewhere.test:${server.port}/tv.png`;
    expect(await outcomesOf(s.t, () => requestWithIcon(s.t, s.tv.clientId, url))).toEqual({ connection_failed: 1 });
    expect(server.requests).toEqual([]);
  });

  it('an http:// icon URL is refused with the request itself, as before', async () => {
    const res = await requestDeviceCode(s.t, { client_id: s.tv.clientId, platform_icon: `http://${ICON_HOST}/tv.png` });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ error: 'invalid_request' });
  });
});

describe('without the test-only loopback setting, the server never fetches from its own host', () => {
  let t: TestApp;
  let tv: { clientId: string };
  beforeAll(async () => {
    // The icon server's names and certificate, but the production address rule.
    t = await startTestApp({ iconFetching: fetchingFrom(server).iconFetching });
    tv = await seedClient(t, { kind: 'tv' });
    server.route('/tv.png', pngHandler);
  });
  afterAll(() => t.close());

  it.each([
    ['a name resolving to 127.0.0.1', () => server.url('/tv.png')],
    ['127.0.0.1 itself', () => server.url('/tv.png', '127.0.0.1')],
    ['::1', () => `https://[::1]:${server.port}/tv.png`],
    ['0.0.0.0', () => `https://0.0.0.0:${server.port}/tv.png`],
    ['127.0.0.1 written as a number', () => `https://2130706433:${server.port}/tv.png`],
    ['::ffff:127.0.0.1, IPv4-mapped', () => `https://[::ffff:127.0.0.1]:${server.port}/tv.png`],
  ])('%s: refused, nothing fetched, no icon', async (_case, url) => {
    const browser = await signedInBrowser(t, await seedUser(t));
    let started: Awaited<ReturnType<typeof requestWithIcon>> | undefined;
    expect(await outcomesOf(t, async () => (started = await requestWithIcon(t, tv.clientId, url())))).toEqual({ not_public: 1 });
    expect(server.requests).toEqual([]);
    expect(await iconOnApprovalPage(browser, started!.user_code)).toBeNull();
  });

  it('ICON_FETCH_ALLOW_LOOPBACK is refused when NODE_ENV=production', () => {
    expect(() => loadConfig({ NODE_ENV: 'production', ICON_FETCH_ALLOW_LOOPBACK: 'true' })).toThrow(
      'invalid configuration: ICON_FETCH_ALLOW_LOOPBACK: is for tests only and refused when NODE_ENV=production',
    );
    expect(loadConfig({ NODE_ENV: 'production' }).iconFetch.allowLoopback).toBe(false);
  });
});

describe('fetches running at once are bounded', () => {
  const s = appFetchingIcons({ ICON_FETCH_CONCURRENCY: '1' });

  it('past the bound a request gets no icon (dropped, not queued), and is answered all the same', async () => {
    const { held, handler } = heldResponses();
    server.route('/slow-first.png', handler);
    server.route('/second.png', pngHandler);
    const first = await startDeviceFlow(s.t, s.tv.clientId, { platform_icon: server.url('/slow-first.png') });
    for (let waited = 0; held.length === 0 && waited < 100; waited++) await new Promise((resolve) => setTimeout(resolve, 10));
    const counted = await outcomesOf(s.t, () => startDeviceFlow(s.t, s.tv.clientId, { platform_icon: server.url('/second.png') }));
    expect(counted).toEqual({ dropped_busy: 1 });
    held[0]?.writeHead(200, { 'content-type': 'image/png' }).end(ICON_PNG);
    await s.t.deps.platformIcons.settled();
    expect(await iconOnApprovalPage(s.browser, first.user_code)).toBe(ICON_PATH);
    expect(server.requests.map((r) => r.path)).toEqual(['/slow-first.png']);
  });
});

describe('housekeeping purges icons nothing shows any more', () => {
  const s = appFetchingIcons();

  it('an icon is kept while a request or a grant names it, and purged an hour after its last use once none does', async () => {
    server.route('/tv.png', pngHandler);
    const started = await requestWithIcon(s.t, s.tv.clientId, server.url('/tv.png'));
    await decide(s.t, started.user_code, s.user.userId, 'approve');
    s.t.clock.advance(5);
    expect((await poll(s.t, s.tv.clientId, started.device_code)).statusCode).toBe(200);
    const grant = await s.t.deps.db.selectFrom('grants').select(['grant_id', 'platform_icon_sha256']).executeTakeFirstOrThrow();
    expect(Buffer.from(grant.platform_icon_sha256!).toString('hex')).toBe(sha256Hex(ICON_PNG));

    // The request is purged; its grant still names the icon.
    s.t.clock.advance(600 + 3600 + 1);
    const first = await purgeExpired(s.t.deps.db, s.t.clock.now(), s.t.config.purge);
    expect(first).toMatchObject({ deviceRequests: 1, platformIcons: 0 });
    expect((await s.t.app.inject({ method: 'GET', url: ICON_PATH })).statusCode).toBe(200);

    // Signed out, and kept for the grant retention: then grant and icon go.
    expect(await signOutDevice(s.t.deps, s.user.userId, grant.grant_id, null)).toBe('signed_out');
    s.t.clock.advance(s.t.config.purge.grantRetentionSeconds + 1);
    const second = await purgeExpired(s.t.deps.db, s.t.clock.now(), s.t.config.purge);
    expect(second).toMatchObject({ grants: 1, platformIcons: 1 });
    expect((await s.t.app.inject({ method: 'GET', url: ICON_PATH })).statusCode).toBe(404);
  });

  it('an icon nothing names is kept for an hour after it was last given to a request, then fetched anew', async () => {
    server.route('/fresh.png', pngHandler);
    await requestWithIcon(s.t, s.tv.clientId, server.url('/fresh.png'));
    await s.t.deps.db.deleteFrom('device_requests').execute();
    expect(await purgeExpired(s.t.deps.db, s.t.clock.now(), s.t.config.purge)).toMatchObject({ platformIcons: 0 });
    s.t.clock.advance(3601);
    expect(await purgeExpired(s.t.deps.db, s.t.clock.now(), s.t.config.purge)).toMatchObject({ platformIcons: 1 });
    // The URL's icon was purged: the next request fetches it again.
    const again = await requestWithIcon(s.t, s.tv.clientId, server.url('/fresh.png'));
    const browser = await signedInBrowser(s.t, s.user);
    expect(await iconOnApprovalPage(browser, again.user_code)).toBe(ICON_PATH);
    expect(server.requests.filter((r) => r.path === '/fresh.png')).toHaveLength(2);
  });
});
