import type { Database } from '../db/connect.js';
import type { RedisConnection } from '../db/redis.js';
import { countManyRateLimitHits, countRateLimitHits, readManyRateLimitHits, refundRateLimitHit, type CounterHits } from '../repositories/rate-limits.js';

export type { CounterHits };

/**
 * Where counters live: the shared database, or Redis when REDIS_URL is set. Either way every
 * instance sees the same counts. Fixed windows: a key's window starts at a multiple of its length.
 * `hit` is atomic (one statement, one INCRBY): it is what makes a reservation hold under concurrency.
 */
export interface CounterStore {
  /** Counts `hits` hits; returns the window's hits including them. */
  hit(key: string, windowStart: Date, windowSeconds: number, hits?: number): Promise<number>;
  /** Counts many counters' hits in one round trip; returns each one's window total. */
  hitMany(counters: ReadonlyArray<CounterHits & { windowSeconds: number }>): Promise<Map<string, number>>;
  /** Many counters' hits so far, in one round trip (absent: none). */
  readMany(counters: ReadonlyArray<Omit<CounterHits, 'hits'>>): Promise<Map<string, number>>;
  /** Takes back one hit counted in that window (a reservation that was not needed). */
  refund(key: string, windowStart: Date, windowSeconds: number): Promise<void>;
  /** Resolves when the store answers, for /readyz; rejects with RedisUnavailableError when it does not. */
  ping(): Promise<void>;
  close(): Promise<void>;
}

export function databaseCounterStore(db: Database): CounterStore {
  return {
    hit: (key, windowStart, _windowSeconds, hits = 1) => countRateLimitHits(db, key, windowStart, hits),
    hitMany: (counters) => countManyRateLimitHits(db, counters),
    readMany: (counters) => readManyRateLimitHits(db, counters),
    refund: (key, windowStart) => refundRateLimitHit(db, key, windowStart),
    // The database's own health is /readyz's first check.
    ping: async () => {},
    close: async () => {},
  };
}

/** The counters in Redis; closing the store closes the connection. */
export function redisCounterStore(redis: RedisConnection): CounterStore {
  const bounded = redis.call;
  // The window is part of the key: a counter from an older window is another key, expiring by itself.
  const windowKey = (key: string, windowStart: Date) => `device-auth:rl:${key}:${windowStart.getTime()}`;
  return {
    async hit(key, windowStart, windowSeconds, hits = 1) {
      const k = windowKey(key, windowStart);
      const [total] = await bounded((client) =>
        client
          .multi()
          .incrBy(k, hits)
          .expire(k, windowSeconds * 2)
          .exec(),
      );
      return Number(total);
    },
    async hitMany(counters) {
      if (counters.length === 0) return new Map();
      const replies = await bounded((client) => {
        const multi = client.multi();
        for (const c of counters) multi.incrBy(windowKey(c.key, c.windowStart), c.hits).expire(windowKey(c.key, c.windowStart), c.windowSeconds * 2);
        return multi.exec();
      });
      return new Map(counters.map((c, i) => [c.key, Number(replies[i * 2])]));
    },
    async readMany(counters) {
      if (counters.length === 0) return new Map();
      const values = await bounded((client) => client.mGet(counters.map((c) => windowKey(c.key, c.windowStart))));
      return new Map(counters.map((c, i) => [c.key, Number(values[i] ?? 0)]));
    },
    async refund(key, windowStart, windowSeconds) {
      const k = windowKey(key, windowStart);
      await bounded((client) =>
        client
          .multi()
          .decr(k)
          .expire(k, windowSeconds * 2)
          .exec(),
      );
    },
    async ping() {
      await bounded((client) => client.ping());
    },
    close: () => redis.close(),
  };
}
