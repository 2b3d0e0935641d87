import type { CounterStore } from './store.js';

/** "5/60": at most 5 in 60 seconds. null: no limit. */
export interface Limit {
  max: number;
  windowSeconds: number;
}

export type LimitName =
  | 'userCodePerUser'
  | 'userCodePerIp'
  | 'signInPerAccount'
  | 'signInPerIp'
  | 'deviceCodePerClient'
  | 'deviceCodePerIp'
  | 'tokenPerClient';

export type Limits = Readonly<Record<LimitName, Limit | null>>;

export type Verdict = { limited: false } | { limited: true; retryAfterSeconds: number };

const ALLOWED: Verdict = { limited: false };

/**
 * Limits of at least this many hits per window are counted in memory and flushed to the shared
 * store every FLUSH_INTERVAL_MS, so that a busy app's polls cost no extra round trip and never
 * queue on one counter row. Across instances such a limit holds within what they admit in one
 * flush interval. Smaller limits (sign-in, user codes) are counted exactly in the store.
 */
export const BUFFERED_FROM = 1000;
export const FLUSH_INTERVAL_MS = 250;

interface LocalCount {
  windowStart: Date;
  windowSeconds: number;
  /** Hits counted here and not yet in the store. */
  unflushed: number;
  /** The store's count at the last flush, ours included. */
  known: number;
}

/**
 * Fixed-window limits over a shared counter store. `consume` counts every attempt (device code
 * and token requests); `check` + `recordFailure` count only failures (wrong user codes, failed
 * sign-ins), so a person who gets it right is never slowed down.
 */
export class RateLimiter {
  readonly #local = new Map<string, LocalCount>();
  #flushTimer: NodeJS.Timeout | null = null;
  #flushing: Promise<void> = Promise.resolve();
  /** The latest time a caller passed in: windows that ended before it are forgotten. */
  #latest = 0;

  constructor(
    private readonly store: CounterStore,
    private readonly limits: Limits,
  ) {}

  #window(limit: Limit, now: Date): { start: Date; retryAfterSeconds: number } {
    const windowMs = limit.windowSeconds * 1000;
    const start = Math.floor(now.getTime() / windowMs) * windowMs;
    return { start: new Date(start), retryAfterSeconds: Math.max(1, Math.ceil((start + windowMs - now.getTime()) / 1000)) };
  }

  /** Counts this attempt and says whether it is over the limit. */
  async consume(name: LimitName, subject: string, now: Date): Promise<Verdict> {
    const limit = this.limits[name];
    if (!limit) return ALLOWED;
    const window = this.#window(limit, now);
    const key = `${name}:${subject}`;
    this.#latest = Math.max(this.#latest, now.getTime());
    let hits: number;
    if (limit.max < BUFFERED_FROM) {
      hits = await this.store.hit(key, window.start, limit.windowSeconds);
    } else {
      let local = this.#local.get(key);
      if (!local || local.windowStart.getTime() !== window.start.getTime()) {
        local = { windowStart: window.start, windowSeconds: limit.windowSeconds, unflushed: 0, known: 0 };
        this.#local.set(key, local);
      }
      local.unflushed++;
      hits = local.known + local.unflushed;
      this.#scheduleFlush();
    }
    return hits > limit.max ? { limited: true, retryAfterSeconds: window.retryAfterSeconds } : ALLOWED;
  }

  #scheduleFlush(): void {
    if (this.#flushTimer) return;
    this.#flushTimer = setTimeout(() => {
      this.#flushTimer = null;
      void this.flush();
    }, FLUSH_INTERVAL_MS);
    this.#flushTimer.unref();
  }

  /** Sends the buffered counts to the shared store and learns the other instances' counts. */
  flush(): Promise<void> {
    this.#flushing = this.#flushing.then(async () => {
      for (const [key, local] of [...this.#local]) {
        const hits = local.unflushed;
        if (hits === 0 && local.windowStart.getTime() + local.windowSeconds * 1000 <= this.#latest) {
          this.#local.delete(key);
          continue;
        }
        local.unflushed = 0;
        try {
          // With nothing new to add, still learn what the other instances counted.
          local.known =
            hits > 0 ? await this.store.hit(key, local.windowStart, local.windowSeconds, hits) : await this.store.read(key, local.windowStart);
        } catch {
          // The store is away: keep the hits for the next flush rather than lose them.
          local.unflushed += hits;
        }
      }
    });
    return this.#flushing;
  }

  async close(): Promise<void> {
    if (this.#flushTimer) clearTimeout(this.#flushTimer);
    this.#flushTimer = null;
    await this.flush();
  }

  /** Whether earlier failures already reached the limit; counts nothing. */
  async check(name: LimitName, subject: string, now: Date): Promise<Verdict> {
    const limit = this.limits[name];
    if (!limit) return ALLOWED;
    const window = this.#window(limit, now);
    const hits = await this.store.read(`${name}:${subject}`, window.start);
    return hits >= limit.max ? { limited: true, retryAfterSeconds: window.retryAfterSeconds } : ALLOWED;
  }

  async recordFailure(name: LimitName, subject: string, now: Date): Promise<void> {
    const limit = this.limits[name];
    if (!limit) return;
    await this.store.hit(`${name}:${subject}`, this.#window(limit, now).start, limit.windowSeconds);
  }

  /** The first limit among several that is reached, checking all of them. */
  static first(verdicts: Verdict[]): Verdict {
    const limited = verdicts.filter((v): v is Extract<Verdict, { limited: true }> => v.limited);
    if (limited.length === 0) return ALLOWED;
    return { limited: true, retryAfterSeconds: Math.max(...limited.map((v) => v.retryAfterSeconds)) };
  }
}
