import type { Database } from '../db/connect.js';
import {
  deleteEndedLinks,
  deleteExpiredAccessTokens,
  deleteExpiredBrowserSessions,
  deleteExpiredDeviceRequests,
} from '../repositories/purge.js';
import { deleteStaleRateLimitCounters } from '../repositories/rate-limits.js';

export interface PurgeOptions {
  batchSize: number;
  /** Upper bound of batches per kind per run, so one run always ends. */
  maxBatches: number;
  /** How long an ended chain (and its events) is kept for the Devices history and operators. */
  linkRetentionSeconds: number;
  /** How long an expired device request is kept, so a late code entry still reads "expired". */
  deviceRequestRetentionSeconds: number;
}

export type PurgeCounts = Record<'deviceRequests' | 'browserSessions' | 'accessTokens' | 'links' | 'rateLimitCounters', number>;

/** Rate limit windows are minutes long; a counter a day old can count nothing any more. */
const RATE_LIMIT_COUNTER_RETENTION_SECONDS = 86400;

const pause = () => new Promise<void>((resolve) => setImmediate(resolve));

async function inBatches(run: () => Promise<number>, options: PurgeOptions): Promise<number> {
  let total = 0;
  for (let i = 0; i < options.maxBatches; i++) {
    const deleted = await run();
    total += deleted;
    if (deleted < options.batchSize) break;
    // Let waiting requests have the database between batches.
    await pause();
  }
  return total;
}

/** Deletes what no request can need any more, in small batches. */
export async function purgeExpired(db: Database, now: Date, options: PurgeOptions): Promise<PurgeCounts> {
  const ago = (seconds: number) => new Date(now.getTime() - seconds * 1000);
  const size = options.batchSize;
  return {
    deviceRequests: await inBatches(() => deleteExpiredDeviceRequests(db, ago(options.deviceRequestRetentionSeconds), size), options),
    browserSessions: await inBatches(() => deleteExpiredBrowserSessions(db, now, size), options),
    accessTokens: await inBatches(() => deleteExpiredAccessTokens(db, now, size), options),
    links: await inBatches(() => deleteEndedLinks(db, ago(options.linkRetentionSeconds), size), options),
    rateLimitCounters: await inBatches(() => deleteStaleRateLimitCounters(db, ago(RATE_LIMIT_COUNTER_RETENTION_SECONDS), size), options),
  };
}
