import type { Database } from '../db/connect.js';
import {
  deleteEndedGrants,
  deleteExpiredAccessTokens,
  deleteExpiredAppAccessTokens,
  deleteExpiredAuthorizationCodes,
  deleteExpiredBrowserSessions,
  deleteExpiredDeviceRequests,
  deleteExpiredDpopProofs,
  deleteOldEvents,
  deleteFinishedDeliveries,
  deleteOldSecurityEventTokens,
} from '../repositories/purge.js';
import { deleteUnusedPlatformIcons } from '../repositories/platform-icons.js';
import { deleteStaleRateLimitCounters } from '../repositories/rate-limits.js';

export interface PurgeOptions {
  batchSize: number;
  /** Upper bound of batches per kind per run, so one run always ends. */
  maxBatches: number;
  /** How long an ended grant is kept for the Devices history and operators. */
  grantRetentionSeconds: number;
  /** How long an event is kept (EVENT_RETENTION_DAYS), whatever became of what it names; 0: for ever. */
  eventRetentionSeconds: number;
  /** How long an expired device request is kept, so a late code entry still reads "expired". */
  deviceRequestRetentionSeconds: number;
  /** How long a stored platform icon that nothing names is kept after it was last given to a request. */
  unusedIconRetentionSeconds: number;
  /** How long a delivered or given-up webhook message and its attempts stay in the delivery log. */
  deliveryRetentionSeconds: number;
  /** How long a Shared Signals SET is kept: longer than push delivery retries (72 h), time for a poll receiver to come back. */
  securityEventTokenRetentionSeconds: number;
}

export type PurgeCounts = Record<
  | 'deviceRequests'
  | 'authorizationCodes'
  | 'browserSessions'
  | 'accessTokens'
  | 'grants'
  | 'rateLimitCounters'
  | 'platformIcons'
  | 'dpopProofs'
  | 'events'
  | 'deliveries'
  | 'securityEventTokens',
  number
>;

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
    deviceRequests: await inBatches(() => deleteExpiredDeviceRequests(db, ago(options.deviceRequestRetentionSeconds), size, now), options),
    authorizationCodes: await inBatches(() => deleteExpiredAuthorizationCodes(db, ago(options.deviceRequestRetentionSeconds), size), options),
    browserSessions: await inBatches(() => deleteExpiredBrowserSessions(db, now, size), options),
    // Users' access tokens and apps' own (the client_credentials grant), counted together.
    accessTokens:
      (await inBatches(() => deleteExpiredAccessTokens(db, now, size), options)) +
      (await inBatches(() => deleteExpiredAppAccessTokens(db, now, size), options)),
    grants: await inBatches(() => deleteEndedGrants(db, ago(options.grantRetentionSeconds), size), options),
    dpopProofs: await inBatches(() => deleteExpiredDpopProofs(db, now, size), options),
    deliveries: await inBatches(() => deleteFinishedDeliveries(db, ago(options.deliveryRetentionSeconds), size), options),
    rateLimitCounters: await inBatches(() => deleteStaleRateLimitCounters(db, ago(RATE_LIMIT_COUNTER_RETENTION_SECONDS), size), options),
    // After the requests: the expiries they recorded just now are young.
    events: options.eventRetentionSeconds === 0 ? 0 : await inBatches(() => deleteOldEvents(db, ago(options.eventRetentionSeconds), size), options),
    securityEventTokens: await inBatches(() => deleteOldSecurityEventTokens(db, ago(options.securityEventTokenRetentionSeconds), size), options),
    // Last: the requests and grants deleted above may have been the last to name an icon.
    platformIcons: await inBatches(() => deleteUnusedPlatformIcons(db, now, ago(options.unusedIconRetentionSeconds), size), options),
  };
}

export interface HousekeepingRun {
  started_at: string;
  finished_at: string;
  outcome: 'done' | 'failed';
  purged: PurgeCounts | null;
  /** Why it failed; never a stack. */
  error: string | null;
}

export interface HousekeepingHealth {
  /** False when the periodic purge is off (PURGE_INTERVAL=0) in this process. */
  scheduled: boolean;
  interval_seconds: number;
  running: boolean;
  last_run: HousekeepingRun | null;
  last_success_at: string | null;
  consecutive_failures: number;
  /** The last run succeeded (or none was due yet). */
  healthy: boolean;
}

/**
 * The purge of one process: periodic when scheduled, on demand from the admin API. Only one run
 * at a time: a request during a run waits for it and gets its result.
 */
export class Housekeeping {
  #running: Promise<PurgeCounts> | null = null;
  #lastRun: HousekeepingRun | null = null;
  #lastSuccessAt: string | null = null;
  #failures = 0;
  #timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly db: Database,
    private readonly clock: { now(): Date },
    private readonly options: PurgeOptions,
    private readonly intervalSeconds: number,
    private readonly onRun: (run: HousekeepingRun, error?: unknown) => void = () => {},
  ) {}

  /** Runs now, or joins the run in progress. Rejects when the run fails. */
  run(): Promise<PurgeCounts> {
    if (this.#running) return this.#running;
    const startedAt = this.clock.now();
    const finish = (purged: PurgeCounts | null, error: unknown) => {
      const failed = error !== undefined;
      this.#lastRun = {
        started_at: startedAt.toISOString(),
        finished_at: this.clock.now().toISOString(),
        outcome: failed ? 'failed' : 'done',
        purged,
        error: failed ? String(error instanceof Error ? error.message : error).slice(0, 300) : null,
      };
      if (failed) this.#failures += 1;
      else {
        this.#failures = 0;
        this.#lastSuccessAt = this.#lastRun.finished_at;
      }
      this.onRun(this.#lastRun, error);
    };
    this.#running = purgeExpired(this.db, startedAt, this.options)
      .then(
        (purged) => {
          finish(purged, undefined);
          return purged;
        },
        (error: unknown) => {
          finish(null, error);
          throw error;
        },
      )
      .finally(() => (this.#running = null));
    return this.#running;
  }

  /** Every interval; a failed run is recorded and retried at the next tick. */
  schedule(): void {
    if (this.intervalSeconds === 0 || this.#timer) return;
    this.#timer = setInterval(() => {
      if (!this.#running) this.run().catch(() => {});
    }, this.intervalSeconds * 1000);
    this.#timer.unref();
  }

  stop(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
  }

  health(): HousekeepingHealth {
    return {
      scheduled: this.#timer !== null,
      interval_seconds: this.intervalSeconds,
      running: this.#running !== null,
      last_run: this.#lastRun,
      last_success_at: this.#lastSuccessAt,
      consecutive_failures: this.#failures,
      healthy: this.#failures === 0,
    };
  }
}
