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
 * Fixed-window limits over a shared counter store. `consume` counts every attempt (device code
 * and token requests); `check` + `recordFailure` count only failures (wrong user codes, failed
 * sign-ins), so a person who gets it right is never slowed down.
 */
export class RateLimiter {
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
    const hits = await this.store.hit(`${name}:${subject}`, window.start, limit.windowSeconds);
    return hits > limit.max ? { limited: true, retryAfterSeconds: window.retryAfterSeconds } : ALLOWED;
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
