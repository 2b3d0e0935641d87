import { randomInt } from 'node:crypto';
import type { LightMyRequestResponse as Response } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FORM, form, seedClient, seedUser, startTestApp, type TestApp } from './helpers/app.js';
import { Browser, signIn } from './helpers/browser.js';
import { createTestDatabase, type TestDatabase } from './helpers/database.js';
import { DEVICE_GRANT, startDeviceFlow } from './helpers/device.js';
import { USER_CODE_ALPHABET, USER_CODE_LENGTH } from '../src/oauth/device/user-code.js';

/**
 * Every limit holds however many requests arrive at once, whichever path reaches the protected
 * state, and wherever the counters live: the database (PostgreSQL or embedded, as the suite
 * runs), Redis, and two instances sharing either.
 */

const REDIS_URL = 'redis://127.0.0.1:6379';
const CONCURRENT = 60;

/** A fresh address per test: Redis counters outlive a run and are shared by concurrent runs. */
const freshAddress = () => `10.${randomInt(256)}.${randomInt(256)}.${randomInt(1, 255)}`;
const freshIPv6Prefix = () => `2001:db8:${randomInt(65536).toString(16)}:${randomInt(65536).toString(16)}`;

function randomCode(): string {
  let code = '';
  for (let i = 0; i < USER_CODE_LENGTH; i++) code += USER_CODE_ALPHABET[randomInt(USER_CODE_ALPHABET.length)];
  return `${code.slice(0, 4)}-${code.slice(4)}`;
}

const statuses = (responses: Response[]) => responses.map((r) => r.statusCode);
const evaluated = (responses: Response[]) => responses.filter((r) => r.statusCode !== 429);

/**
 * Each attempt takes its place in every limit's count at once; one past any limit is refused, so
 * fewer than `limit` may be evaluated when several limits race, never more.
 */
function expectAtMost(count: number, limit: number) {
  expect(count).toBeLessThanOrEqual(limit);
  expect(count).toBeGreaterThan(0);
}

function expectRefusedWithRetryAfter(responses: Response[]) {
  for (const res of responses.filter((r) => r.statusCode === 429)) {
    expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
  }
}

interface Setup {
  name: string;
  env: Record<string, string>;
  instances: 1 | 2;
}

const SETUPS: Setup[] = [
  { name: 'counters in the database', env: {}, instances: 1 },
  { name: 'counters in Redis', env: { REDIS_URL }, instances: 1 },
  { name: 'two instances sharing the database', env: {}, instances: 2 },
  { name: 'two instances sharing Redis', env: { REDIS_URL }, instances: 2 },
];

const GUESS_LIMITS = {
  RATE_LIMIT_USER_CODE_PER_USER: '5/60',
  RATE_LIMIT_USER_CODE_PER_IP: '8/60',
  RATE_LIMIT_SIGNIN_PER_ACCOUNT_IP: '5/900',
  RATE_LIMIT_SIGNIN_PER_IP: '30/900',
  RATE_LIMIT_SIGNIN_PER_ACCOUNT: '20/900',
  // The reservation is what is tested here, not the bound on verifications running at once.
  PASSWORD_CHECKS_PER_IP: '64',
  PASSWORD_CHECKS_QUEUED: '1000',
};

describe.each(SETUPS)('reserve first, then decide ($name)', (setup) => {
  let database: TestDatabase;
  let instances: TestApp[];
  let tv: { clientId: string };

  beforeAll(async () => {
    database = await createTestDatabase();
    instances = [];
    for (let i = 0; i < setup.instances; i++) instances.push(await startTestApp({ database, env: { ...GUESS_LIMITS, ...setup.env } }));
    // One moment for every instance: they count in the same fixed windows.
    for (const other of instances.slice(1)) other.clock.advance((instances[0]!.clock.now().getTime() - other.clock.now().getTime()) / 1000);
    tv = await seedClient(instances[0]!);
  });
  afterAll(async () => {
    for (const instance of instances) await instance.close();
    await database.drop();
  });

  /** The i-th of several requests sent at once, with a browser's cookies, to one of the instances in turn. */
  function postAs(browser: Browser, i: number, url: string, fields: Record<string, string>, remoteAddress: string) {
    const cookie = [...browser.cookies].map(([name, value]) => `${name}=${value}`).join('; ');
    return instances[i % instances.length]!.app.inject({
      method: 'POST',
      url,
      remoteAddress,
      headers: { ...FORM, cookie },
      payload: form({ csrf_token: browser.csrfToken ?? undefined, ...fields }),
    });
  }

  async function signedInAt(address: string) {
    const user = await seedUser(instances[0]!);
    const browser = new Browser(instances[0]!, { remoteAddress: address });
    await browser.follow(await signIn(browser, user));
    return { user, browser };
  }

  it(`of ${CONCURRENT} wrong codes sent at once by one user, at most 5 are evaluated and the rest get 429 with Retry-After`, async () => {
    const address = freshAddress();
    const { browser } = await signedInAt(address);
    const results = await Promise.all(Array.from({ length: CONCURRENT }, (_, i) => postAs(browser, i, '/activate', { user_code: randomCode() }, address)));
    expectAtMost(evaluated(results).length, 5);
    expect(statuses(evaluated(results)).every((s) => s === 400)).toBe(true);
    expectRefusedWithRetryAfter(results);
  });

  it(`of ${CONCURRENT} decisions with a wrong request handle sent at once, at most 5 are evaluated, and the request stays pending`, async () => {
    const address = freshAddress();
    const { browser } = await signedInAt(address);
    const flow = await startDeviceFlow(instances[0]!, tv.clientId);
    const results = await Promise.all(
      Array.from({ length: CONCURRENT }, (_, i) =>
        postAs(browser, i, '/activate/decision', { user_code: flow.user_code, request_handle: `forged-${i}`, action: 'deny' }, address),
      ),
    );
    expectAtMost(evaluated(results).length, 5);
    expect(statuses(evaluated(results)).every((s) => s === 400)).toBe(true);
    expectRefusedWithRetryAfter(results);
    // The code itself is still live: the owner can still enter it (once the window has passed).
    for (const instance of instances) instance.clock.advance(60);
    const approval = await browser.post('/activate', { user_code: flow.user_code });
    expect(approval.statusCode).toBe(200);
  });

  it('code entry and decision share one budget: sent together, at most 5 in all are evaluated', async () => {
    const address = freshAddress();
    const { browser } = await signedInAt(address);
    const flow = await startDeviceFlow(instances[0]!, tv.clientId);
    const results = await Promise.all(
      Array.from({ length: CONCURRENT }, (_, i) =>
        i % 2 === 0
          ? postAs(browser, i, '/activate', { user_code: randomCode() }, address)
          : postAs(browser, i, '/activate/decision', { user_code: flow.user_code, request_handle: `forged-${i}`, action: 'deny' }, address),
      ),
    );
    expectAtMost(evaluated(results).length, 5);
  });

  it('wrong codes sent at once by several users from one address: at most the per-address limit (8) are evaluated', async () => {
    const address = freshAddress();
    const users = [await signedInAt(address), await signedInAt(address), await signedInAt(address)];
    const results = await Promise.all(
      Array.from({ length: CONCURRENT }, (_, i) => postAs(users[i % users.length]!.browser, i, '/activate', { user_code: randomCode() }, address)),
    );
    expectAtMost(evaluated(results).length, 8);
  });

  it('a right code gives its reservation back: after 20 right ones, 5 wrong ones are still evaluated', async () => {
    const address = freshAddress();
    const { browser } = await signedInAt(address);
    const flow = await startDeviceFlow(instances[0]!, tv.clientId);
    for (let i = 0; i < 20; i++) expect((await postAs(browser, i, '/activate', { user_code: flow.user_code }, address)).statusCode).toBe(200);
    const wrong = [];
    for (let i = 0; i < 6; i++) wrong.push((await postAs(browser, i, '/activate', { user_code: randomCode() }, address)).statusCode);
    expect(wrong).toEqual([400, 400, 400, 400, 400, 429]);
  });

  it('100 sign-in attempts at once on one account from one address: at most 5 passwords are verified, the right one included', async () => {
    const address = freshAddress();
    const user = await seedUser(instances[0]!);
    const browser = new Browser(instances[0]!, { remoteAddress: address });
    await browser.get('/signin');
    const results = await Promise.all(
      Array.from({ length: 100 }, (_, i) => postAs(browser, i, '/signin', { email: user.email, password: i === 77 ? user.password : `wrong ${i}` }, address)),
    );
    // 401 (wrong) and 303 (right) are the answers of a verified password.
    const verified = results.filter((r) => r.statusCode === 401 || r.statusCode === 303);
    expect(verified.length).toBeLessThanOrEqual(5);
    expect(verified.length).toBeGreaterThan(0);
    // The rest were refused unverified: past the limit (429), or past the address's places (503).
    expect(results.filter((r) => r.statusCode === 429 || r.statusCode === 503).length).toBeGreaterThanOrEqual(95);
    expectRefusedWithRetryAfter(results);
    for (const res of results.filter((r) => r.statusCode === 503)) expect(res.headers['retry-after']).toBe('1');
  });
});

describe('password verifications are bounded per address and for the process', () => {
  let t: TestApp;
  beforeAll(async () => {
    // No failure limits: the bound on verifications alone must keep the server responsive.
    t = await startTestApp({ env: { PASSWORD_CHECKS_RUNNING: '2', PASSWORD_CHECKS_QUEUED: '16', PASSWORD_CHECKS_PER_IP: '2' } });
  });
  afterAll(() => t.close());

  async function signInPage(address: string) {
    const browser = new Browser(t, { remoteAddress: address });
    await browser.get('/signin');
    return browser;
  }

  it.each([
    ['one address', (_i: number, address: string) => address, freshAddress],
    ['many addresses of one IPv6 /64', (i: number, prefix: string) => `${prefix}:${(i + 1).toString(16)}::${i.toString(16)}`, freshIPv6Prefix],
  ])('a flood of 200 sign-ins from %s neither delays nor refuses a sign-in from another: it completes within 2 s', async (_case, addressOf, fresh) => {
    const origin = fresh();
    const attackers = await Promise.all(Array.from({ length: 10 }, (_, i) => signInPage(addressOf(i, origin))));
    const owner = await seedUser(t);
    const ownerBrowser = await signInPage(freshAddress());
    const flood = Promise.all(
      Array.from({ length: 200 }, (_, i) => attackers[i % 10]!.post('/signin', { email: `victim-${i % 3}@example.test`, password: `guess ${i}` })),
    );
    const started = performance.now();
    const legitimate = await ownerBrowser.post('/signin', { email: owner.email, password: owner.password });
    const took = performance.now() - started;
    const flooded = await flood;
    expect(legitimate.statusCode, legitimate.body).toBe(303);
    expect(took).toBeLessThan(2000);
    // At most two of the flood's verifications were in hand at once; the rest were turned away at once.
    const busy = flooded.filter((r) => r.statusCode === 503);
    expect(busy.length).toBeGreaterThan(150);
    for (const res of busy) {
      expect(res.headers['retry-after']).toBe('1');
      expect(res.body).toContain('being checked right now');
    }
  });

  it('a flood from 200 addresses at once is answered fast: what finds no place gets 503 at once, nothing waits long', async () => {
    const browsers = await Promise.all(Array.from({ length: 200 }, () => signInPage(freshAddress())));
    const most = { running: 0, waiting: 0 };
    const sampler = setInterval(() => {
      const now = t.deps.passwordChecks.stats();
      most.running = Math.max(most.running, now.running);
      most.waiting = Math.max(most.waiting, now.waiting);
    }, 1);
    const started = performance.now();
    const results = await Promise.all(
      browsers.map(async (browser, i) => {
        const res = await browser.post('/signin', { email: `someone-${i}@example.test`, password: 'guess' });
        return { status: res.statusCode, ms: performance.now() - started };
      }),
    );
    const admitted = results.filter((r) => r.status === 401);
    const busy = results.filter((r) => r.status === 503);
    clearInterval(sampler);
    expect(admitted.length + busy.length).toBe(200);
    expect(busy.length).toBeGreaterThan(0);
    expect(most.running).toBeLessThanOrEqual(2);
    expect(most.running).toBeGreaterThan(0);
    expect(most.waiting).toBeLessThanOrEqual(16);
    expect(Math.max(...results.map((r) => r.ms))).toBeLessThan(10_000);
    expect(t.deps.passwordChecks.stats()).toEqual({ running: 0, waiting: 0, addresses: 0 });
  });
});

describe('nobody can lock out an account owner', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({
      env: {
        RATE_LIMIT_SIGNIN_PER_ACCOUNT_IP: '5/900',
        RATE_LIMIT_SIGNIN_PER_IP: '30/900',
        RATE_LIMIT_SIGNIN_PER_ACCOUNT: '8/900',
        SIGNIN_SLOWDOWN_MS: '400',
      },
    });
  });
  afterAll(() => t.close());

  async function attempt(address: string, email: string, password: string) {
    const browser = new Browser(t, { remoteAddress: address });
    await browser.get('/signin');
    const started = performance.now();
    const res = await browser.post('/signin', { email, password });
    return { status: res.statusCode, ms: performance.now() - started, res };
  }

  it('ten wrong passwords from one address lock that address out of the account, not the owner at another', async () => {
    const user = await seedUser(t);
    const attacker = freshAddress();
    const answers = [];
    for (let i = 0; i < 10; i++) answers.push((await attempt(attacker, user.email, `wrong ${i}`)).status);
    expect(answers).toEqual([401, 401, 401, 401, 401, 429, 429, 429, 429, 429]);
    expect((await attempt(attacker, user.email, user.password)).status).toBe(429);
    const owner = await attempt(freshAddress(), user.email, user.password);
    expect(owner.status).toBe(303);
    expect(owner.ms).toBeLessThan(2000);
  });

  it("an account attacked from many addresses slows the owner's right password from a clean address, never refuses it", async () => {
    const user = await seedUser(t);
    const attackers = Array.from({ length: 8 }, freshAddress);
    for (const address of attackers) expect((await attempt(address, user.email, 'wrong')).status).toBe(401);
    // Past the account's threshold: an address that already failed on it is refused...
    const again = await attempt(attackers[0]!, user.email, user.password);
    expect(again.status).toBe(429);
    expect(again.res.body).toContain('Too many failed sign-in attempts');
    // ...and one that has not is heard, slowly.
    const owner = await attempt(freshAddress(), user.email, user.password);
    expect(owner.status).toBe(303);
    expect(owner.ms).toBeGreaterThanOrEqual(400);
    expect(owner.ms).toBeLessThan(2000);
    // Below the threshold nobody is slowed.
    const other = await seedUser(t);
    const quick = await attempt(freshAddress(), other.email, other.password);
    expect(quick.status).toBe(303);
    expect(quick.ms).toBeLessThan(400);
  });
});

describe("one address cannot exhaust an app's shared budget", () => {
  let t: TestApp;
  let app: { clientId: string };
  beforeAll(async () => {
    t = await startTestApp({
      env: {
        TRUST_PROXY: '127.0.0.1',
        RATE_LIMIT_TOKEN_PER_IP: '10/60',
        RATE_LIMIT_TOKEN_PER_CLIENT: '40/60',
        RATE_LIMIT_DEVICE_CODE_PER_IP: '5/60',
        RATE_LIMIT_DEVICE_CODE_PER_CLIENT: '20/60',
      },
    });
    app = await seedClient(t);
  });
  afterAll(() => t.close());

  const fromAddress = (address: string) => ({ 'x-forwarded-for': address });
  const tokenRequest = (address: string, deviceCode: string) =>
    t.app.inject({
      method: 'POST',
      url: '/oauth/token',
      headers: { ...FORM, ...fromAddress(address) },
      payload: form({ grant_type: DEVICE_GRANT, device_code: deviceCode, client_id: app.clientId }),
    });
  const codeRequest = (address: string) =>
    t.app.inject({ method: 'POST', url: '/oauth/device/code', headers: { ...FORM, ...fromAddress(address) }, payload: form({ client_id: app.clientId }) });

  it.each([
    ['an IPv4 address', () => freshAddress(), () => freshAddress()],
    ['one IPv6 /64 (many addresses in it)', () => `${freshIPv6Prefix()}:1:2:3:`, () => `${freshIPv6Prefix()}::1`],
  ])('junk token requests from %s get 429 while a device of the same app elsewhere keeps its answers', async (_case, attackerFor, deviceAt) => {
    t.clock.advance(60);
    const attacker = attackerFor();
    const flood = await Promise.all(
      Array.from({ length: 200 }, (_, i) => tokenRequest(attacker.endsWith(':') ? `${attacker}${i.toString(16)}` : attacker, `da_dc_junk${i}`)),
    );
    expect(flood.filter((r) => r.statusCode !== 429).length).toBe(10);
    for (const res of flood.filter((r) => r.statusCode === 429)) {
      expect(res.json().error).toBe('temporarily_unavailable');
      expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
    }
    const device = deviceAt();
    const flow = await startDeviceFlow(t, app.clientId, {}, fromAddress(device));
    for (let i = 0; i < 5; i++) {
      t.clock.advance(5);
      const res = await tokenRequest(device, flow.device_code);
      expect(res.json().error).toBe('authorization_pending');
    }
  });

  it('device-code requests from one IPv6 /64 get 429 past its limit; a device of the same app on another /64 still gets a code', async () => {
    t.clock.advance(60);
    const prefix = freshIPv6Prefix();
    const flood = await Promise.all(Array.from({ length: 50 }, (_, i) => codeRequest(`${prefix}:${i.toString(16)}::${(i * 7).toString(16)}`)));
    expect(flood.filter((r) => r.statusCode === 200).length).toBe(5);
    expect(flood.filter((r) => r.statusCode === 429).length).toBe(45);
    const elsewhere = await codeRequest(`${freshIPv6Prefix()}::1`);
    expect(elsewhere.statusCode).toBe(200);
  });
});
