import type { LightMyRequestResponse as Response } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { seedUser, startTestApp, type TestApp } from './helpers/app.js';
import { Browser, signIn } from './helpers/browser.js';
import { floodAddresses, legitAddress, sendAll, timed } from './helpers/flood.js';

/**
 * Issue 28 §1: password-check capacity (the process's queue of argon2 verifications) is shared
 * fairly across networks (IPv4 address and /24; IPv6 /64, /56, /48); addresses and accounts with
 * a recent success come first; a refusal for capacity counts against the sender's address.
 */

async function signInPage(t: TestApp, address: string): Promise<Browser> {
  const browser = new Browser(t, { remoteAddress: address });
  await browser.get('/signin');
  return browser;
}

describe('a flood of sign-ins from 300 addresses in many networks', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({
      env: { PASSWORD_CHECKS_RUNNING: '2', PASSWORD_CHECKS_QUEUED: '8', PASSWORD_CHECKS_PER_IP: '2', RATE_LIMIT_SIGNIN_PER_IP: '30/900' },
    });
  });
  afterAll(() => t.close());

  it('is refused, while users whose address or account signed in recently get their normal answer within 2 s, every time', async () => {
    // Two users who signed in before: one comes back from the same address, the other from a new one.
    const atHome = await seedUser(t);
    const home = legitAddress();
    expect((await signIn(await signInPage(t, home), atHome)).statusCode).toBe(303);
    const travelling = await seedUser(t);
    expect((await signIn(await signInPage(t, legitAddress(6)), travelling)).statusCode).toBe(303);

    const flood = await Promise.all(floodAddresses(300).map((address) => signInPage(t, address)));
    const attempts = flood.map((browser, i) => () => browser.post('/signin', { email: `nobody-${i}@example.test`, password: 'guess' }));
    let floodDone = false;
    const flooding = sendAll(attempts, 20).finally(() => (floodDone = true));

    const legitimate: Array<{ result: Response; ms: number }> = [];
    for (let i = 0; i < 6 && !floodDone; i++) {
      const [user, address] = i % 2 === 0 ? [atHome, home] : [travelling, legitAddress(6)];
      const browser = await signInPage(t, address);
      legitimate.push(await timed(() => browser.post('/signin', { email: user.email, password: user.password })));
    }
    const flooded = await flooding;

    // The users signed in while the flood was on, every time, within 2 s.
    expect(legitimate.length).toBeGreaterThanOrEqual(3);
    for (const { result, ms } of legitimate) {
      expect(result.statusCode, result.body).toBe(303);
      expect(ms).toBeLessThan(2000);
    }
    // The flood: mostly turned away at once (503 with Retry-After), the rest refused as wrong.
    const busy = flooded.filter((r) => r.statusCode === 503);
    expect(busy.length).toBeGreaterThan(flooded.length / 2);
    for (const res of busy) expect(res.headers['retry-after']).toBe('1');
    expect(flooded.every((r) => [401, 429, 503].includes(r.statusCode))).toBe(true);
    expect(t.deps.passwordChecks.stats()).toEqual({ running: 0, waiting: 0, addresses: 0 });
  });
});

describe('a refusal for capacity counts against the sender', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({
      env: { PASSWORD_CHECKS_RUNNING: '1', PASSWORD_CHECKS_QUEUED: '0', PASSWORD_CHECKS_PER_IP: '1', RATE_LIMIT_SIGNIN_PER_IP: '3/900' },
    });
  });
  afterAll(() => t.close());

  it("sign-ins turned away as busy use up the address's failures: after three, even the right password from there gets 429, and another address is heard", async () => {
    const user = await seedUser(t);
    const address = legitAddress();
    const browser = await signInPage(t, address);
    const burst = await Promise.all(Array.from({ length: 4 }, (_, i) => browser.post('/signin', { email: `nobody-${i}@example.test`, password: 'guess' })));
    expect(burst.map((r) => r.statusCode).sort()).toEqual([401, 503, 503, 503]);
    const after = await signIn(await signInPage(t, address), user);
    expect(after.statusCode).toBe(429);
    expect(after.body).toContain('Too many failed sign-in attempts');
    expect((await signIn(await signInPage(t, legitAddress()), user)).statusCode).toBe(303);
  });
});
