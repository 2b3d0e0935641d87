import type { Database } from '../db/connect.js';
import type { RedisConnection } from '../db/redis.js';
import type { Clock } from '../lib/clock.js';
import { recordDpopProof } from '../repositories/dpop-proofs.js';

/**
 * The DPoP proofs already used (RFC 9449 §11.1), shared by every instance: the first claim of a
 * proof wins until it expires. One atomic operation each (INSERT … ON CONFLICT DO NOTHING, or
 * SET NX), so concurrent claims cannot both win. Not a rate limit: it only lives in the same
 * shared store as the counters, the database or Redis with REDIS_URL.
 */
export interface DpopReplayStore {
  claimOnce(proofHash: Uint8Array, expiresAt: Date): Promise<boolean>;
}

export function databaseDpopReplayStore(db: Database): DpopReplayStore {
  return { claimOnce: (proofHash, expiresAt) => recordDpopProof(db, proofHash, expiresAt) };
}

export function redisDpopReplayStore(redis: RedisConnection, clock: Pick<Clock, 'now'> = { now: () => new Date() }): DpopReplayStore {
  return {
    async claimOnce(proofHash, expiresAt) {
      const seconds = Math.max(1, Math.ceil((expiresAt.getTime() - clock.now().getTime()) / 1000));
      const reply = await redis.call((client) =>
        client.set(`device-auth:once:${Buffer.from(proofHash).toString('base64url')}`, '1', { NX: true, EX: seconds }),
      );
      return reply === 'OK';
    },
  };
}
