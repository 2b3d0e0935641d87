import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RateLimiter, BUFFERED_FROM, type Limits } from '../src/rate-limits/limiter.js';
import { databaseCounterStore } from '../src/rate-limits/store.js';
import { createTestDatabase, type TestDatabase } from './helpers/database.js';

let database: TestDatabase;
beforeAll(async () => {
  database = await createTestDatabase();
});
afterAll(() => database.drop());

const limits = (max: number): Limits => ({
  userCodePerUser: null,
  userCodePerIp: null,
  signInPerAccountIp: null,
  signInPerAccount: null,
  signInPerIp: null,
  deviceCodePerClient: null,
  deviceCodePerIp: null,
  tokenPerClient: { max, windowSeconds: 60 },
  tokenPerIp: null,
  userinfoPerIp: null,
  introspectPerClient: null,
  introspectPerIp: null,
  revokePerClient: null,
  revokePerIp: null,
});

const storedHits = async (subject: string) =>
  (await database.handle.db.selectFrom('rate_limit_counters').select('hits').where('key', '=', `tokenPerClient:${subject}`).executeTakeFirst())?.hits ?? 0;

describe('high limits are counted in memory and flushed to the shared store', () => {
  const now = new Date('2026-11-21T12:00:10Z');

  it('a single instance enforces the limit exactly, and the store learns the count at the flush', async () => {
    const limiter = new RateLimiter(databaseCounterStore(database.handle.db), limits(BUFFERED_FROM));
    const subject = `client-${Math.random()}`;
    const verdicts = [];
    for (let i = 0; i < BUFFERED_FROM + 5; i++) verdicts.push(await limiter.consume('tokenPerClient', subject, now));
    expect(verdicts.filter((v) => v.limited)).toHaveLength(5);
    // Nothing was written per request.
    expect(await storedHits(subject)).toBe(0);
    await limiter.flush();
    expect(await storedHits(subject)).toBe(BUFFERED_FROM + 5);
    await limiter.close();
  });

  it('two instances share the count through the store: after a flush each refuses what the other admitted', async () => {
    const store = databaseCounterStore(database.handle.db);
    const one = new RateLimiter(store, limits(BUFFERED_FROM));
    const two = new RateLimiter(store, limits(BUFFERED_FROM));
    const subject = `client-${Math.random()}`;
    for (let i = 0; i < BUFFERED_FROM / 2; i++) await one.consume('tokenPerClient', subject, now);
    for (let i = 0; i < BUFFERED_FROM / 2; i++) await two.consume('tokenPerClient', subject, now);
    await one.flush();
    await two.flush();
    await one.flush();
    // Both now know the window is full.
    expect((await one.consume('tokenPerClient', subject, now)).limited).toBe(true);
    expect((await two.consume('tokenPerClient', subject, now)).limited).toBe(true);
    await one.close();
    await two.close();
    expect(await storedHits(subject)).toBe(BUFFERED_FROM + 2);
  });

  it('a new window starts from zero', async () => {
    const limiter = new RateLimiter(databaseCounterStore(database.handle.db), limits(BUFFERED_FROM));
    const subject = `client-${Math.random()}`;
    for (let i = 0; i < BUFFERED_FROM + 1; i++) await limiter.consume('tokenPerClient', subject, now);
    expect((await limiter.consume('tokenPerClient', subject, now)).limited).toBe(true);
    const next = new Date(now.getTime() + 60_000);
    expect((await limiter.consume('tokenPerClient', subject, next)).limited).toBe(false);
    await limiter.close();
  });

  it('hits are kept, not lost, while the store is away', async () => {
    let fail = true;
    const real = databaseCounterStore(database.handle.db);
    const flaky = { ...real, hitMany: async (...args: Parameters<typeof real.hitMany>) => (fail ? Promise.reject(new Error('down')) : real.hitMany(...args)) };
    const limiter = new RateLimiter(flaky, limits(BUFFERED_FROM));
    const subject = `client-${Math.random()}`;
    for (let i = 0; i < 10; i++) await limiter.consume('tokenPerClient', subject, now);
    await limiter.flush();
    expect(await storedHits(subject)).toBe(0);
    fail = false;
    await limiter.flush();
    expect(await storedHits(subject)).toBe(10);
    await limiter.close();
  });
});

describe('a reservation the store cannot refund now is refunded later', () => {
  it('an outage does not turn attempts that were never evaluated into failures', async () => {
    const now = new Date('2026-11-21T12:00:10Z');
    let away = true;
    const real = databaseCounterStore(database.handle.db);
    const flaky = { ...real, refund: async (...args: Parameters<typeof real.refund>) => (away ? Promise.reject(new Error('down')) : real.refund(...args)) };
    const guessLimits: Limits = { ...limits(BUFFERED_FROM), userCodePerUser: { max: 3, windowSeconds: 60 } };
    const limiter = new RateLimiter(flaky, guessLimits);
    const subject = `user-${Math.random()}`;
    const stored = async () =>
      (await database.handle.db.selectFrom('rate_limit_counters').select('hits').where('key', '=', `userCodePerUser:${subject}`).executeTakeFirst())?.hits;
    for (let i = 0; i < 3; i++) await (await limiter.reserve([['userCodePerUser', subject]], now)).refund();
    expect(await stored()).toBe(3);
    await limiter.flush();
    expect(await stored()).toBe(3);
    away = false;
    await limiter.flush();
    expect(await stored()).toBe(0);
    expect((await limiter.reserve([['userCodePerUser', subject]], now)).verdict().limited).toBe(false);
    await limiter.close();
  });
});
