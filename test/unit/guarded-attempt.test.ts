import { describe, expect, it } from 'vitest';
import { guardedAttempt } from '../../src/rate-limits/guarded-attempt.js';
import { RateLimiter, type FailureLimitName, type Limits, type Reservation } from '../../src/rate-limits/limiter.js';
import type { CounterStore } from '../../src/rate-limits/store.js';

/** Counters in a map: the store's contract (atomic hit, refund) without a database. */
class CountersInMemory implements CounterStore {
  readonly counts = new Map<string, number>();
  #slot = (key: string, windowStart: Date) => `${key}@${windowStart.toISOString()}`;
  async hit(key: string, windowStart: Date, _windowSeconds: number, hits = 1): Promise<number> {
    const total = (this.counts.get(this.#slot(key, windowStart)) ?? 0) + hits;
    this.counts.set(this.#slot(key, windowStart), total);
    return total;
  }
  async hitMany(): Promise<Map<string, number>> {
    return new Map();
  }
  async readMany(): Promise<Map<string, number>> {
    return new Map();
  }
  async refund(key: string, windowStart: Date): Promise<void> {
    this.counts.set(this.#slot(key, windowStart), (this.counts.get(this.#slot(key, windowStart)) ?? 0) - 1);
  }
  async ping(): Promise<void> {}
  async close(): Promise<void> {}
  total(): number {
    return [...this.counts.values()].reduce((sum, n) => sum + n, 0);
  }
}

const NOW = new Date('2026-11-26T12:00:10Z');
const LIMITS: Limits = {
  deviceCodePerClient: null,
  deviceCodePerIp: null,
  tokenPerClient: null,
  tokenPerIp: null,
  userinfoPerIp: null,
  introspectPerClient: null,
  introspectPerIp: null,
  revokePerClient: null,
  revokePerIp: null,
  userCodePerUser: { max: 2, windowSeconds: 60 },
  userCodePerIp: { max: 3, windowSeconds: 60 },
  signInPerAccountIp: null,
  signInPerIp: null,
  signInPerAccount: null,
};
const GUESS: ReadonlyArray<readonly [FailureLimitName, string]> = [
  ['userCodePerUser', 'user-1'],
  ['userCodePerIp', '192.0.2.1'],
];

function limiter() {
  const store = new CountersInMemory();
  return { store, limiter: new RateLimiter(store, LIMITS) };
}

type Outcome = 'wrong' | 'right' | 'busy';
const keeps = (outcome: Outcome) => (outcome === 'wrong' ? 'all' : outcome === 'right' ? 'none' : (['userCodePerIp'] as const));

describe('one guarded attempt: reserve, verdict, evaluate, refund', () => {
  it('a wrong guess keeps its counts; past the limit the next is refused unevaluated, with the wait, and gives its counts back', async () => {
    const { store, limiter: l } = limiter();
    let evaluated = 0;
    const attempt = {
      limits: GUESS,
      evaluate: async (): Promise<Outcome> => {
        evaluated++;
        return 'wrong';
      },
      kept: keeps,
    };
    expect(await guardedAttempt(l, NOW, attempt)).toEqual({ limited: false, outcome: 'wrong' });
    expect(await guardedAttempt(l, NOW, attempt)).toEqual({ limited: false, outcome: 'wrong' });
    expect(store.total()).toBe(4);
    expect(await guardedAttempt(l, NOW, attempt)).toEqual({ limited: true, retryAfterSeconds: 50 });
    expect(evaluated).toBe(2);
    expect(store.total()).toBe(4);
  });

  it('a right guess gives its counts back before it answers', async () => {
    const { store, limiter: l } = limiter();
    const result = await guardedAttempt(l, NOW, { limits: GUESS, evaluate: async (): Promise<Outcome> => 'right', kept: keeps });
    expect(result).toEqual({ limited: false, outcome: 'right' });
    expect(store.total()).toBe(0);
  });

  it('an outcome that keeps some counts gives back only the others', async () => {
    const { store, limiter: l } = limiter();
    await guardedAttempt(l, NOW, { limits: GUESS, evaluate: async (): Promise<Outcome> => 'busy', kept: keeps });
    await new Promise((resolve) => setImmediate(resolve));
    expect([...store.counts].map(([key, n]) => [key.split(':')[0], n])).toEqual([
      ['userCodePerUser', 0],
      ['userCodePerIp', 1],
    ]);
  });

  it('an attempt that could not be evaluated was no guess: its counts come back and the error goes on', async () => {
    const { store, limiter: l } = limiter();
    const failing = { limits: GUESS, evaluate: async (): Promise<Outcome> => Promise.reject(new Error('database away')), kept: keeps };
    await expect(guardedAttempt(l, NOW, failing)).rejects.toThrow('database away');
    await new Promise((resolve) => setImmediate(resolve));
    expect(store.total()).toBe(0);
  });

  it('a verdict of its own decides which limits refuse: here only the per-address one', async () => {
    const { limiter: l } = limiter();
    const attempt = {
      limits: GUESS,
      verdict: (reservation: Reservation) => reservation.verdict(['userCodePerIp']),
      evaluate: async (): Promise<Outcome> => 'wrong',
      kept: keeps,
    };
    const results = [];
    for (let i = 0; i < 4; i++) results.push((await guardedAttempt(l, NOW, attempt)).limited);
    expect(results).toEqual([false, false, false, true]);
  });
});
