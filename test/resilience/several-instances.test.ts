import { createLocalJWKSet, decodeProtectedHeader, jwtVerify, type JSONWebKeySet } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DeviceAuthorizationResponse } from '../../src/oauth/device/authorization.js';
import { seedClient, seedUser } from '../helpers/app.js';
import { createTestDatabase, type TestDatabase } from '../helpers/database.js';
import { startServerProcess, type ServerProcess } from '../helpers/server-process.js';
import { createClusterDatabase, postgresBinariesPresent } from '../helpers/throwaway-cluster.js';
import type { TestClient } from '../helpers/tokens.js';
import {
  approveOverHttp,
  deviceSignInOverHttp,
  introspectOverHttp,
  pollOverHttp,
  pollUntilIssued,
  refreshOverHttp,
  requestCodeOverHttp,
  revokeOverHttp,
  send,
  signInOverHttp,
  userinfoOverHttp,
  WebBrowser,
} from '../helpers/web.js';

/**
 * Two real server processes on one PostgreSQL database, as behind a load balancer: one public
 * ISSUER, each process on its own port. Everything a client or a browser holds must work on
 * either: device codes, approvals, browser sessions, signing keys, revocations.
 *
 * Not covered yet: shared rate limits (there are none so far).
 */

// The embedded database belongs to one process, so this needs PostgreSQL: the run's server when
// TEST_DATABASE_URL is set, a throwaway cluster of our own otherwise.
const runnable = Boolean(process.env.TEST_DATABASE_URL) || postgresBinariesPresent();
const ISSUER = 'http://auth.example.test';

let database: TestDatabase;
let a: ServerProcess;
let b: ServerProcess;
const CODES_PER_CLIENT = 20;
let tv: TestClient;
let bot: TestClient;
let rs: TestClient;
let user: { email: string; password: string };

describe.skipIf(!runnable)('two server processes on one PostgreSQL database (never the embedded one: it admits one process)', () => {
  beforeAll(async () => {
    database = process.env.TEST_DATABASE_URL ? await createTestDatabase() : await createClusterDatabase();
    const seeding = { deps: { db: database.handle.db } };
    tv = await seedClient(seeding, { kind: 'tv' });
    bot = await seedClient(seeding, { kind: 'bot', type: 'confidential', name: 'Helper Bot' });
    rs = await seedClient(seeding, { kind: 'web', type: 'confidential', name: 'Photo API' });
    user = await seedUser(seeding);
    const env = {
      DATABASE_URL: database.url!,
      ISSUER,
      DEVICE_POLL_INTERVAL: '1',
      LOG_LEVEL: 'warn',
      PURGE_INTERVAL: '0',
      // Low enough to reach in a test, high enough for the other tests here.
      RATE_LIMIT_DEVICE_CODE_PER_CLIENT: `${CODES_PER_CLIENT}/60`,
      RATE_LIMIT_DEVICE_CODE_PER_IP: '5000/60',
      RATE_LIMIT_SIGNIN_PER_ACCOUNT: '3/900',
    };
    // Started together on a database without a signing key: they must agree on one.
    [a, b] = await Promise.all([startServerProcess(env, 60_000), startServerProcess(env, 60_000)]);
  }, 120_000);

  afterAll(async () => {
    try {
      await Promise.all([a?.stop(), b?.stop()]);
    } finally {
      await database?.drop();
    }
  });

  it('share rate limits: device codes counted on both reach the per-app limit on both', async () => {
    const app = await seedClient({ deps: { db: database.handle.db } }, { kind: 'tv', name: 'Busy TV' });
    for (let i = 0; i < CODES_PER_CLIENT; i++) {
      const res = await requestCodeOverHttp((i % 2 === 0 ? a : b).url, app);
      expect(res.status, res.body).toBe(200);
    }
    for (const s of [a, b]) {
      const res = await requestCodeOverHttp(s.url, app);
      expect(res.status).toBe(429);
      expect(res.json().error).toBe('temporarily_unavailable');
    }
  });

  it('share rate limits: failed sign-ins on both reach the per-account limit on both', async () => {
    const victim = await seedUser({ deps: { db: database.handle.db } });
    const attempt = async (server: ServerProcess, password: string) => {
      const browser = new WebBrowser(server.url);
      await browser.get('/signin');
      return (await browser.post('/signin', { email: victim.email, password })).status;
    };
    for (const s of [a, b, a]) expect(await attempt(s, 'not the password')).toBe(401);
    // Even the right password now waits, on either instance.
    for (const s of [a, b]) expect(await attempt(s, victim.password)).toBe(429);
  });

  it("publish the same signing keys, and an ID token signed by one verifies with the other's JWKS (same kid, same issuer)", async () => {
    const jwksOf = async (s: ServerProcess) => (await send(`${s.url}/.well-known/jwks.json`)).json<JSONWebKeySet>();
    const [jwksA, jwksB] = await Promise.all([jwksOf(a), jwksOf(b)]);
    expect(jwksA.keys.length).toBeGreaterThan(0);
    expect(jwksB).toEqual(jwksA);

    const browser = new WebBrowser(a.url);
    await signInOverHttp(browser, user);
    const tokens = await deviceSignInOverHttp(browser, tv, { issue: a.url, approve: a.url, redeem: a.url });
    const { kid } = decodeProtectedHeader(tokens.id_token!);
    expect(jwksB.keys.map((k) => k.kid)).toContain(kid);
    const { payload } = await jwtVerify(tokens.id_token!, createLocalJWKSet(jwksB), { issuer: ISSUER, audience: tv.clientId });
    expect(payload.email).toBe(user.email);
    for (const s of [a, b]) {
      expect((await send(`${s.url}/.well-known/openid-configuration`)).json().issuer).toBe(ISSUER);
    }
  });

  it.each([
    ['A', 'B', 'A'],
    ['A', 'B', 'B'],
    ['B', 'A', 'A'],
  ])('a code issued by %s is approved through %s and redeemed through %s; then it is spent on both', async (issue, approve, redeem) => {
    const server = (name: string) => (name === 'A' ? a : b).url;
    const browser = new WebBrowser(server(approve));
    await signInOverHttp(browser, user);
    const issued = await requestCodeOverHttp(server(issue), tv);
    expect(issued.status, issued.body).toBe(200);
    const flow = issued.json<DeviceAuthorizationResponse>();
    // The verification URI names the public issuer, whichever instance answered.
    expect(flow.verification_uri).toBe(`${ISSUER}/activate`);
    expect((await approveOverHttp(browser, flow.user_code, flow.confirmation_phrase)).body).toContain('Device connected');
    const tokens = await pollUntilIssued(server(redeem), tv, flow);

    for (const s of [a, b]) {
      const replay = await pollOverHttp(s.url, tv, flow.device_code);
      expect(replay.status).toBe(400);
      expect(replay.json().error).toBe('invalid_grant');
      expect((await userinfoOverHttp(s.url, tokens.access_token)).status).toBe(200);
    }
  });

  it('an approved code polled at both instances at once delivers its tokens exactly once', async () => {
    const browser = new WebBrowser(a.url);
    await signInOverHttp(browser, user);
    const flow = (await requestCodeOverHttp(b.url, bot)).json<DeviceAuthorizationResponse>();
    const decision = await approveOverHttp(browser, flow.user_code, flow.confirmation_phrase, { page: '/activate/bot' });
    expect(decision.body).toContain('Bot connected');
    await new Promise((r) => setTimeout(r, flow.interval * 1000 + 50));
    const answers = await Promise.all([a, b, a, b].map((s) => pollOverHttp(s.url, bot, flow.device_code)));
    expect(answers.map((r) => r.status).sort()).toEqual([200, 400, 400, 400]);
    for (const r of answers.filter((x) => x.status === 400)) expect(r.json().error).toBe('invalid_grant');
  });

  it('a browser session started on one is signed in on the other; a sign-out on one is seen by the other at the next request', async () => {
    const browser = new WebBrowser(a.url);
    await signInOverHttp(browser, user, { via: a.url });
    expect(browser.cookies.has('da_session')).toBe(true);
    expect((await browser.get('/activate', { via: b.url })).status).toBe(200);

    // A second tab keeps the same cookie.
    const otherTab = new WebBrowser(a.url);
    for (const [name, value] of browser.cookies) otherTab.cookies.set(name, value);
    otherTab.csrfToken = browser.csrfToken;
    expect((await otherTab.get('/activate', { via: a.url })).status).toBe(200);

    const signedOut = await browser.post('/signout', {}, { via: b.url });
    expect(signedOut.status).toBe(303);
    expect(browser.cookies.has('da_session')).toBe(false);
    // The session is gone on the server side, not only from this browser's jar.
    const next = await otherTab.get('/activate', { via: a.url });
    expect(next.status).toBe(303);
    expect(next.headers.get('location')).toMatch(/^\/signin/);
  });

  it("a revocation through one is refused by the other's introspection, userinfo and token endpoint at the next request", async () => {
    const browser = new WebBrowser(a.url);
    await signInOverHttp(browser, user);
    const tokens = await deviceSignInOverHttp(browser, tv, { issue: a.url, approve: a.url, redeem: a.url });
    expect((await introspectOverHttp(a.url, rs, tokens.access_token)).json().active).toBe(true);
    expect((await userinfoOverHttp(a.url, tokens.access_token)).status).toBe(200);

    // RFC 7009 §2.2: 200 {} on B.
    const revoked = await revokeOverHttp(b.url, tv, tokens.refresh_token!);
    expect(revoked.status).toBe(200);

    expect((await introspectOverHttp(a.url, rs, tokens.access_token)).json()).toEqual({ active: false });
    expect((await userinfoOverHttp(a.url, tokens.access_token)).status).toBe(401);
    const refreshed = await refreshOverHttp(a.url, tv, tokens.refresh_token!);
    expect(refreshed.status).toBe(400);
    expect(refreshed.json().error).toBe('invalid_grant');
  });

  it('a refresh rotated on one is retried on the other with the same answer; replayed there after the successor was used, it revokes the grant on both', async () => {
    const browser = new WebBrowser(b.url);
    await signInOverHttp(browser, user);
    const first = await deviceSignInOverHttp(browser, tv, { issue: b.url, approve: b.url, redeem: b.url });
    const rotated = await refreshOverHttp(a.url, tv, first.refresh_token!);
    expect(rotated.status, rotated.body).toBe(200);
    const second = rotated.json<{ access_token: string; refresh_token: string }>();

    // The answer from A was lost; B computes the same one.
    const retried = await refreshOverHttp(b.url, tv, first.refresh_token!);
    expect(retried.status, retried.body).toBe(200);
    expect(retried.json<{ access_token: string; refresh_token: string }>()).toMatchObject({
      access_token: second.access_token,
      refresh_token: second.refresh_token,
    });

    const used = await refreshOverHttp(a.url, tv, second.refresh_token);
    expect(used.status, used.body).toBe(200);
    const third = used.json<{ access_token: string; refresh_token: string }>();
    const replay = await refreshOverHttp(b.url, tv, first.refresh_token!);
    expect(replay.status).toBe(400);
    expect(replay.json().error).toBe('invalid_grant');
    // The successor issued by A is dead on A too.
    expect((await refreshOverHttp(a.url, tv, third.refresh_token)).json().error).toBe('invalid_grant');
    expect((await introspectOverHttp(a.url, rs, third.access_token)).json()).toEqual({ active: false });
  });
});
