import { createClient, ErrorReply } from 'redis';
import type { Database } from '../db/connect.js';
import {
  countManyRateLimitHits,
  countRateLimitHits,
  readManyRateLimitHits,
  refundRateLimitHit,
  type CounterHits,
} from '../repositories/rate-limits.js';
import { recordDpopProof } from '../repositories/dpop-proofs.js';

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
  /** Resolves when the store answers, for /readyz; rejects with CounterStoreUnavailableError when it does not. */
  ping(): Promise<void>;
  close(): Promise<void>;
}

/**
 * The counter store (Redis) did not answer in time or is not connected: the request that needed
 * it may succeed once it is back, so it is answered 503 with Retry-After, never left hanging.
 */
export class CounterStoreUnavailableError extends Error {
  constructor(cause: unknown) {
    super(`the rate-limit store (Redis) is unavailable: ${cause instanceof Error ? cause.message.slice(0, 200) : 'no answer'}`, { cause });
    this.name = 'CounterStoreUnavailableError';
  }
}

/** Every Redis call answers within this, or its request is answered 503 (issue 28 §3). */
export const REDIS_CALL_TIMEOUT_MS = 500;

/**
 * Keys that may be used once across every instance (DPoP proofs, RFC 9449 §11.1), kept in the
 * same shared store as the counters: the first claim of a key wins until it expires. One atomic
 * operation each (INSERT … ON CONFLICT DO NOTHING, or SET NX), so concurrent claims cannot both win.
 */
export interface OnceStore {
  claimOnce(key: Uint8Array, expiresAt: Date): Promise<boolean>;
}

export function databaseCounterStore(db: Database): CounterStore & OnceStore {
  return {
    claimOnce: (key, expiresAt) => recordDpopProof(db, key, expiresAt),
    hit: (key, windowStart, _windowSeconds, hits = 1) => countRateLimitHits(db, key, windowStart, hits),
    hitMany: (counters) => countManyRateLimitHits(db, counters),
    readMany: (counters) => readManyRateLimitHits(db, counters),
    refund: (key, windowStart) => refundRateLimitHit(db, key, windowStart),
    // The database's own health is /readyz's first check.
    ping: async () => {},
    close: async () => {},
  };
}

/**
 * A Redis call bounded in time: a reply error (a bug of ours) passes as it is; anything else (no
 * connection, a timeout, a socket closed under the call) is CounterStoreUnavailableError.
 */
function bounded<T>(call: () => Promise<T>): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new CounterStoreUnavailableError(new Error(`no answer within ${REDIS_CALL_TIMEOUT_MS} ms`))), REDIS_CALL_TIMEOUT_MS);
    timer.unref();
    call().then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (error: unknown) => {
        clearTimeout(timer);
        reject(error instanceof ErrorReply ? error : new CounterStoreUnavailableError(error));
      },
    );
  });
}

export async function redisCounterStore(url: string, clock: { now(): Date } = { now: () => new Date() }): Promise<CounterStore & OnceStore> {
  const client = createClient({
    url,
    // No offline queue: while Redis is away a call fails at once instead of waiting for a reconnection (issue 28 §3).
    disableOfflineQueue: true,
    socket: { connectTimeout: 1000, reconnectStrategy: (retries) => Math.min(retries * 100, 1000) },
  });
  // Reconnection is the client's job; an error event must not crash the process.
  client.on('error', () => {});
  await client.connect();
  // The window is part of the key: a counter from an older window is another key, expiring by itself.
  const windowKey = (key: string, windowStart: Date) => `device-auth:rl:${key}:${windowStart.getTime()}`;
  return {
    async claimOnce(key, expiresAt) {
      const seconds = Math.max(1, Math.ceil((expiresAt.getTime() - clock.now().getTime()) / 1000));
      const reply = await bounded(() => client.set(`device-auth:once:${Buffer.from(key).toString('base64url')}`, '1', { NX: true, EX: seconds }));
      return reply === 'OK';
    },
    async hit(key, windowStart, windowSeconds, hits = 1) {
      const k = windowKey(key, windowStart);
      const [total] = await bounded(() => client.multi().incrBy(k, hits).expire(k, windowSeconds * 2).exec());
      return Number(total);
    },
    async hitMany(counters) {
      if (counters.length === 0) return new Map();
      const multi = client.multi();
      for (const c of counters) multi.incrBy(windowKey(c.key, c.windowStart), c.hits).expire(windowKey(c.key, c.windowStart), c.windowSeconds * 2);
      const replies = await bounded(() => multi.exec());
      return new Map(counters.map((c, i) => [c.key, Number(replies[i * 2])]));
    },
    async readMany(counters) {
      if (counters.length === 0) return new Map();
      const values = await bounded(() => client.mGet(counters.map((c) => windowKey(c.key, c.windowStart))));
      return new Map(counters.map((c, i) => [c.key, Number(values[i] ?? 0)]));
    },
    async refund(key, windowStart, windowSeconds) {
      const k = windowKey(key, windowStart);
      await bounded(() => client.multi().decr(k).expire(k, windowSeconds * 2).exec());
    },
    async ping() {
      await bounded(() => client.ping());
    },
    async close() {
      // A polite QUIT only to a Redis that is there; else the connection (and its reconnection) just ends.
      if (client.isReady) await bounded(() => client.close()).catch(() => {});
      if (client.isOpen) client.destroy();
    },
  };
}
