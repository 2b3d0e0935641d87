import { spawn, type ChildProcess } from 'node:child_process';
import { createServer, connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { seedClient, seedUser, startTestApp, type TestApp } from '../helpers/app.js';
import { Browser, signIn } from '../helpers/browser.js';
import { requestDeviceCode } from '../helpers/device.js';
import type { TestClient } from '../helpers/tokens.js';

/**
 * Issue 28 §3: with REDIS_URL set and Redis stopped, device-code requests and sign-ins got no
 * answer for 20 s and /readyz stayed 200. Every Redis call now has a short timeout and no offline
 * queue: while Redis is away the requests that need it get 503 temporarily_unavailable with
 * Retry-After (a 503 page on pages) within 1 s, /readyz says so, and the process recovers by
 * itself. The test runs a Redis of its own on a free loopback port, and stops and starts it.
 */

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

const canConnect = (port: number) =>
  new Promise<boolean>((resolve) => {
    const socket = connect({ host: '127.0.0.1', port }, () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });

/** Polls `check` every 100 ms until it holds, at most `seconds`. */
async function within(seconds: number, check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + seconds * 1000;
  while (Date.now() < deadline) {
    if (await check()) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`not within ${seconds} s`);
}

let port: number;
let redis: ChildProcess | null = null;

async function startRedis(): Promise<void> {
  redis = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
  await within(10, () => canConnect(port));
}

async function killRedis(): Promise<void> {
  const child = redis;
  if (!child || child.exitCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGKILL');
  await exited;
  redis = null;
}

let t: TestApp;
let tv: TestClient;
let user: Awaited<ReturnType<typeof seedUser>>;

beforeAll(async () => {
  port = await freePort();
  await startRedis();
  t = await startTestApp({
    env: {
      REDIS_URL: `redis://127.0.0.1:${port}`,
      // Limits counted exactly in the store on every request of these kinds (below BUFFERED_FROM).
      RATE_LIMIT_DEVICE_CODE_PER_IP: '900/60',
      RATE_LIMIT_SIGNIN_PER_IP: '900/60',
      RATE_LIMIT_SIGNIN_PER_ACCOUNT_IP: '900/60',
    },
  });
  tv = await seedClient(t);
  user = await seedUser(t);
}, 60_000);
afterAll(async () => {
  await t?.close();
  await killRedis();
});

const readyz = () => t.app.inject({ method: 'GET', url: '/readyz' });
const deviceCode = () => requestDeviceCode(t, { client_id: tv.clientId });

/** A request's answer and how long it took, in ms. */
async function timed<T>(send: () => Promise<T>): Promise<{ answer: T; ms: number }> {
  const started = Date.now();
  const answer = await send();
  return { answer, ms: Date.now() - started };
}

async function expectServedNormally(): Promise<void> {
  expect((await readyz()).statusCode).toBe(200);
  expect((await deviceCode()).statusCode).toBe(200);
  const browser = new Browser(t);
  expect((await signIn(browser, user)).statusCode).toBe(303);
}

async function expectFastRefusals(): Promise<void> {
  const code = await timed(deviceCode);
  expect(code.ms).toBeLessThan(1000);
  expect(code.answer.statusCode).toBe(503);
  expect(code.answer.json().error).toBe('temporarily_unavailable');
  expect(Number(code.answer.headers['retry-after'])).toBeGreaterThan(0);

  const browser = new Browser(t);
  await browser.get('/signin');
  const page = await timed(() => browser.post('/signin', { email: user.email, password: user.password }));
  expect(page.ms).toBeLessThan(1000);
  expect(page.answer.statusCode).toBe(503);
  expect(page.answer.headers['content-type']).toMatch(/^text\/html/);
  expect(Number(page.answer.headers['retry-after'])).toBeGreaterThan(0);

  const ready = await timed(readyz);
  expect(ready.ms).toBeLessThan(1000);
  expect(ready.answer.statusCode).toBe(503);
  expect(ready.answer.json()).toEqual({ status: 'unavailable', reason: 'redis unreachable' });
}

describe('Redis away (REDIS_URL) fails fast and recovers by itself', () => {
  it('Redis killed: device codes and sign-ins get 503 with Retry-After within 1 s, /readyz 503; started again, all is answered as before', async () => {
    await expectServedNormally();
    await killRedis();
    await expectFastRefusals();
    // Again a few seconds later, while the client keeps trying to reconnect.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    await expectFastRefusals();
    await startRedis();
    await within(10, async () => (await readyz()).statusCode === 200);
    await expectServedNormally();
  }, 60_000);

  it('Redis that stops answering (SIGSTOP) without closing its connections: 503 within 1 s; resumed, answered again', async () => {
    await expectServedNormally();
    redis!.kill('SIGSTOP');
    try {
      await expectFastRefusals();
    } finally {
      redis!.kill('SIGCONT');
    }
    await within(10, async () => (await readyz()).statusCode === 200);
    await expectServedNormally();
  }, 60_000);
});
