import { describe, expect, it } from 'vitest';
import { BUFFERED_FROM, RateLimiter, type LimitName, type Limits } from '../../src/rate-limits/limiter.js';
import type { CounterStore } from '../../src/rate-limits/store.js';

/** A store that is never reached before a flush: these limits are counted in memory. */
const unreachedStore: CounterStore = {
  hit: () => Promise.reject(new Error('an in-memory limit went to the store')),
  hitMany: async (counters) => new Map(counters.map((counter) => [counter.key, counter.hits])),
  readMany: async () => new Map(),
  refund: async () => {},
  ping: async () => {},
  close: async () => {},
};

const only = (name: LimitName, max: number): Limits =>
  Object.fromEntries(
    (
      [
        'userCodePerUser',
        'userCodePerIp',
        'signInPerAccountIp',
        'signInPerAccount',
        'signInPerIp',
        'deviceCodePerClient',
        'deviceCodePerIp',
        'tokenPerClient',
        'tokenPerIp',
        'userinfoPerIp',
        'introspectPerClient',
        'introspectPerIp',
        'revokePerClient',
        'revokePerIp',
      ] as const
    ).map((limit) => [limit, limit === name ? { max, windowSeconds: 60 } : null]),
  ) as unknown as Limits;

describe('limits counted in memory', () => {
  const max = BUFFERED_FROM;
  // 12:00:10 falls in the window 12:00:00-12:01:00: 50 seconds are left.
  const now = new Date('2026-11-21T12:00:10.250Z');

  it('answer synchronously, refuse past the limit with the seconds left in the window, and count each subject apart', async () => {
    const limiter = new RateLimiter(unreachedStore, only('tokenPerIp', max));
    for (let i = 0; i < max; i++) expect(limiter.consume('tokenPerIp', '203.0.113.7', now)).toEqual({ limited: false });
    expect(limiter.consume('tokenPerIp', '203.0.113.7', now)).toEqual({ limited: true, retryAfterSeconds: 50 });
    expect(limiter.consume('tokenPerIp', '203.0.113.8', now)).toEqual({ limited: false });
    // The next window starts from zero.
    expect(limiter.consume('tokenPerIp', '203.0.113.7', new Date('2026-11-21T12:01:00Z'))).toEqual({ limited: false });
    await limiter.close();
  });

  it('past an app budget, refuse the heaviest network and answer a light one, until the window ends', async () => {
    const limiter = new RateLimiter(unreachedStore, only('tokenPerClient', max), 0.001);
    const flood = ['2001:db8:1:1::/64', '2001:db8:1::/56', '2001:db8:1::/48'];
    for (let i = 0; i <= max; i++) limiter.consumeShared('tokenPerClient', 'tv', flood, now);
    expect(limiter.consumeShared('tokenPerClient', 'tv', flood, now)).toEqual({ limited: true, retryAfterSeconds: 50 });
    // A device of its own network is answered although the app's budget is spent.
    expect(limiter.consumeShared('tokenPerClient', 'tv', ['198.51.100.20', '198.51.100.0/24'], now)).toEqual({ limited: false });
    // Another app's budget is its own.
    expect(limiter.consumeShared('tokenPerClient', 'radio', flood, now)).toEqual({ limited: false });
    expect(limiter.consumeShared('tokenPerClient', 'tv', flood, new Date('2026-11-21T12:01:00Z'))).toEqual({ limited: false });
    await limiter.close();
  });
});
