import { createClient, ErrorReply } from 'redis';

/**
 * Redis, when REDIS_URL is set: the store shared by every instance for the rate-limit counters
 * (rate-limits/store.ts) and the DPoP proofs already used (oauth/dpop-replay.ts), one connection
 * for both.
 */
export type RedisClient = ReturnType<typeof newClient>;

function newClient(url: string) {
  return createClient({
    url,
    // No offline queue: while Redis is away a call fails at once instead of waiting for a reconnection (issue 28 §3).
    disableOfflineQueue: true,
    socket: { connectTimeout: 1000, reconnectStrategy: (retries: number) => Math.min(retries * 100, 1000) },
  });
}

/**
 * Redis did not answer in time or is not connected: the request that needed it may succeed once
 * it is back, so it is answered 503 with Retry-After, never left hanging.
 */
export class RedisUnavailableError extends Error {
  constructor(cause: unknown) {
    super(`the rate-limit store (Redis) is unavailable: ${cause instanceof Error ? cause.message.slice(0, 200) : 'no answer'}`, { cause });
    this.name = 'RedisUnavailableError';
  }
}

/** Every Redis call answers within this, or its request is answered 503 (issue 28 §3). */
const REDIS_CALL_TIMEOUT_MS = 500;

export interface RedisConnection {
  /**
   * A Redis call bounded in time: a reply error (a bug of ours) passes as it is; anything else (no
   * connection, a timeout, a socket closed under the call) is RedisUnavailableError.
   */
  call<T>(call: (client: RedisClient) => Promise<T>): Promise<T>;
  close(): Promise<void>;
}

export async function connectRedis(url: string): Promise<RedisConnection> {
  const client = newClient(url);
  // Reconnection is the client's job; an error event must not crash the process.
  client.on('error', () => {});
  await client.connect();
  const call = <T>(operation: (client: RedisClient) => Promise<T>): Promise<T> =>
    new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => reject(new RedisUnavailableError(new Error(`no answer within ${REDIS_CALL_TIMEOUT_MS} ms`))), REDIS_CALL_TIMEOUT_MS);
      timer.unref();
      operation(client).then(
        (value) => {
          clearTimeout(timer);
          resolve(value);
        },
        (error: unknown) => {
          clearTimeout(timer);
          reject(error instanceof ErrorReply ? error : new RedisUnavailableError(error));
        },
      );
    });
  return {
    call,
    async close() {
      // A polite QUIT only to a Redis that is there; else the connection (and its reconnection) just ends.
      if (client.isReady) await call((c) => c.close()).catch(() => {});
      if (client.isOpen) client.destroy();
    },
  };
}
