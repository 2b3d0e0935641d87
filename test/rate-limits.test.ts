import { createClient } from 'redis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { seedClient, seedUser, startTestApp, type TestApp } from './helpers/app.js';
import { Browser, signIn } from './helpers/browser.js';
import { createTestDatabase, type TestDatabase } from './helpers/database.js';
import { poll, requestDeviceCode, startDeviceFlow } from './helpers/device.js';
import { USER_CODE_ALPHABET, USER_CODE_LENGTH } from '../src/oauth/device/user-code.js';

const LIMITS = {
  RATE_LIMIT_USER_CODE_PER_USER: '5/60',
  RATE_LIMIT_USER_CODE_PER_IP: '8/60',
  RATE_LIMIT_SIGNIN_PER_ACCOUNT_IP: '3/900',
  RATE_LIMIT_SIGNIN_PER_ACCOUNT: '20/900',
  RATE_LIMIT_SIGNIN_PER_IP: '5/900',
  RATE_LIMIT_DEVICE_CODE_PER_CLIENT: '4/60',
  RATE_LIMIT_DEVICE_CODE_PER_IP: '6/60',
  RATE_LIMIT_TOKEN_PER_CLIENT: '3/60',
};

let database: TestDatabase;
let t: TestApp;

beforeAll(async () => {
  database = await createTestDatabase();
  t = await startTestApp({ database, env: LIMITS });
});
afterAll(async () => {
  await t.close();
  await database.drop();
});

function randomCode(): string {
  let code = '';
  for (let i = 0; i < USER_CODE_LENGTH; i++) code += USER_CODE_ALPHABET[Math.floor(Math.random() * USER_CODE_ALPHABET.length)];
  return `${code.slice(0, 4)}-${code.slice(4)}`;
}

async function signedIn(app: TestApp = t) {
  const user = await seedUser(app);
  const browser = new Browser(app);
  await browser.follow(await signIn(browser, user));
  return { user, browser };
}

describe('user code guessing (RFC 8628 §5.1)', () => {
  it('five wrong codes a minute per user, then a 429 page with Retry-After that refuses even a right code', async () => {
    const { browser } = await signedIn();
    for (let i = 0; i < 5; i++) {
      const res = await browser.post('/activate', { user_code: randomCode() });
      expect(res.statusCode).toBe(400);
    }
    const { client } = { client: await seedClient(t) };
    const real = await startDeviceFlow(t, client.clientId);
    const limited = await browser.post('/activate', { user_code: real.user_code });
    expect(limited.statusCode).toBe(429);
    expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0);
    expect(Number(limited.headers['retry-after'])).toBeLessThanOrEqual(60);
    expect(limited.headers['content-type']).toContain('text/html');
    expect(limited.body).toContain('Too many wrong codes');
    t.clock.advance(60);
    const after = await browser.post('/activate', { user_code: real.user_code });
    expect(after.statusCode).toBe(200);
    expect(after.body).toContain(real.confirmation_phrase.slice(0, 3));
  });

  it('guessing stops long before a meaningful share of the code space is tried', async () => {
    const { browser } = await signedIn();
    let evaluated = 0;
    // Ten minutes (a code's whole life) of an attacker trying 30 codes a minute.
    for (let minute = 0; minute < 10; minute++) {
      for (let i = 0; i < 30; i++) {
        const res = await browser.post('/activate', { user_code: randomCode() });
        if (res.statusCode !== 429) evaluated++;
      }
      t.clock.advance(60);
    }
    expect(evaluated).toBeLessThanOrEqual(50);
    const share = evaluated / USER_CODE_ALPHABET.length ** USER_CODE_LENGTH;
    expect(share).toBeLessThan(1e-8);
  });

  it('wrong codes from one address count across users', async () => {
    t.clock.advance(60);
    const a = await signedIn();
    const b = await signedIn();
    for (let i = 0; i < 5; i++) await a.browser.post('/activate', { user_code: randomCode() });
    for (let i = 0; i < 3; i++) expect((await b.browser.post('/activate', { user_code: randomCode() })).statusCode).toBe(400);
    expect((await b.browser.post('/activate', { user_code: randomCode() })).statusCode).toBe(429);
  });
});

describe('sign-in attempts', () => {
  it('three failures on an account from one address, then 429 with Retry-After there even for the right password', async () => {
    t.clock.advance(900);
    const user = await seedUser(t);
    const browser = new Browser(t);
    for (let i = 0; i < 3; i++) {
      await browser.get('/signin');
      expect((await browser.post('/signin', { email: user.email, password: 'wrong password' })).statusCode).toBe(401);
    }
    await browser.get('/signin');
    const limited = await browser.post('/signin', { email: user.email, password: user.password });
    expect(limited.statusCode).toBe(429);
    expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0);
    expect(limited.body).toContain('Too many failed sign-in attempts');
    t.clock.advance(900);
    await browser.get('/signin');
    expect((await browser.post('/signin', { email: user.email, password: user.password })).statusCode).toBe(303);
  });

  it('failures from one address count across accounts', async () => {
    t.clock.advance(900);
    const browser = new Browser(t);
    for (let i = 0; i < 5; i++) {
      await browser.get('/signin');
      await browser.post('/signin', { email: `nobody${i}@example.test`, password: 'guess' });
    }
    const user = await seedUser(t);
    await browser.get('/signin');
    expect((await browser.post('/signin', { email: user.email, password: user.password })).statusCode).toBe(429);
  });
});

describe('OAuth endpoints answer 429 with Retry-After and an OAuth error body', () => {
  it('device code requests per client', async () => {
    t.clock.advance(60);
    const { clientId } = await seedClient(t);
    for (let i = 0; i < 4; i++) expect((await requestDeviceCode(t, { client_id: clientId })).statusCode).toBe(200);
    const res = await requestDeviceCode(t, { client_id: clientId });
    expect(res.statusCode).toBe(429);
    expect(res.headers['retry-after']).toMatch(/^\d+$/);
    expect(res.headers['cache-control']).toBe('no-store');
    expect(res.json()).toMatchObject({ error: 'temporarily_unavailable', error_description: expect.stringContaining('retry after') });
  });

  it('device code requests per address, across clients', async () => {
    t.clock.advance(60);
    for (let i = 0; i < 6; i++) expect((await requestDeviceCode(t, { client_id: (await seedClient(t)).clientId })).statusCode).toBe(200);
    expect((await requestDeviceCode(t, { client_id: (await seedClient(t)).clientId })).statusCode).toBe(429);
  });

  it('token requests per client', async () => {
    // Windows are fixed minutes: start at the top of one so the polls below share it.
    t.clock.advance(60 - ((t.clock.now().getTime() / 1000) % 60));
    const { clientId } = await seedClient(t);
    const flow = await startDeviceFlow(t, clientId);
    for (let i = 0; i < 3; i++) {
      t.clock.advance(5);
      expect((await poll(t, clientId, flow.device_code)).json().error).toBe('authorization_pending');
    }
    const res = await poll(t, clientId, flow.device_code);
    expect(res.statusCode).toBe(429);
    expect(res.json().error).toBe('temporarily_unavailable');
  });
});

describe('counters are shared by every instance', () => {
  it("on the shared database: a second instance sees the first one's counts", async () => {
    t.clock.advance(60);
    const second = await startTestApp({ database, env: LIMITS });
    try {
      second.clock.advance((t.clock.now().getTime() - second.clock.now().getTime()) / 1000);
      const { clientId } = await seedClient(t);
      for (let i = 0; i < 4; i++) {
        const instance = i % 2 === 0 ? t : second;
        expect((await requestDeviceCode(instance, { client_id: clientId })).statusCode).toBe(200);
      }
      expect((await requestDeviceCode(second, { client_id: clientId })).statusCode).toBe(429);
      expect((await requestDeviceCode(t, { client_id: clientId })).statusCode).toBe(429);
    } finally {
      await second.close();
    }
  });

  it('in Redis when REDIS_URL is set', async () => {
    // Redis outlives test runs and is shared by concurrent ones: only per-client keys (fresh ids) are counted here.
    const env = { ...LIMITS, RATE_LIMIT_DEVICE_CODE_PER_IP: 'off', REDIS_URL: 'redis://127.0.0.1:6379' };
    const one = await startTestApp({ env });
    const two = await startTestApp({ env, database: one.database });
    const redis = createClient({ url: 'redis://127.0.0.1:6379' });
    await redis.connect();
    try {
      two.clock.advance((one.clock.now().getTime() - two.clock.now().getTime()) / 1000);
      const { clientId } = await seedClient(one);
      for (let i = 0; i < 4; i++) expect((await requestDeviceCode(i % 2 ? one : two, { client_id: clientId })).statusCode).toBe(200);
      expect((await requestDeviceCode(one, { client_id: clientId })).statusCode).toBe(429);
      const keys = await redis.keys(`device-auth:rl:deviceCodePerClient:${clientId}:*`);
      expect(keys).toHaveLength(1);
      expect(Number(await redis.get(keys[0]!))).toBe(5);
      // Nothing was counted in the database.
      const rows = await one.deps.db.selectFrom('rate_limit_counters').selectAll().where('key', 'like', `%${clientId}%`).execute();
      expect(rows).toHaveLength(0);
      await redis.del(keys);
    } finally {
      await redis.quit();
      await two.close();
      await one.close();
    }
  });
});
