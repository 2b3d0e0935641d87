import { createClient } from 'redis';
import type { Database } from '../db/connect.js';
import { countRateLimitHits, readRateLimitHits } from '../repositories/rate-limits.js';

/**
 * Where counters live: the shared database, or Redis when REDIS_URL is set. Either way every
 * instance sees the same counts. Fixed windows: a key's window starts at a multiple of its length.
 */
export interface CounterStore {
  /** Counts `hits` hits; returns the window's hits including them. */
  hit(key: string, windowStart: Date, windowSeconds: number, hits?: number): Promise<number>;
  /** The window's hits so far. */
  read(key: string, windowStart: Date): Promise<number>;
  close(): Promise<void>;
}

export function databaseCounterStore(db: Database): CounterStore {
  return {
    hit: (key, windowStart, _windowSeconds, hits = 1) => countRateLimitHits(db, key, windowStart, hits),
    read: (key, windowStart) => readRateLimitHits(db, key, windowStart),
    close: async () => {},
  };
}

export async function redisCounterStore(url: string): Promise<CounterStore> {
  const client = createClient({ url, socket: { connectTimeout: 5000, reconnectStrategy: (retries) => Math.min(retries * 100, 2000) } });
  // Reconnection is the client's job; an error event must not crash the process.
  client.on('error', () => {});
  await client.connect();
  const windowKey = (key: string, windowStart: Date) => `device-auth:rl:${key}:${windowStart.getTime()}`;
  return {
    async hit(key, windowStart, windowSeconds, hits = 1) {
      const k = windowKey(key, windowStart);
      const [total] = await client.multi().incrBy(k, hits).expire(k, windowSeconds * 2).exec();
      return Number(total);
    },
    async read(key, windowStart) {
      return Number((await client.get(windowKey(key, windowStart))) ?? 0);
    },
    async close() {
      await client.quit().catch(() => {});
    },
  };
}
