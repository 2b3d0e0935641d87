import type { CounterStore } from './store.js';

/** "5/60": at most 5 in 60 seconds. null: no limit. */
export interface Limit {
  max: number;
  windowSeconds: number;
}

/** Limits that count every request (`consume`). */
export type RequestLimitName =
  | 'deviceCodePerClient'
  | 'deviceCodePerIp'
  | 'tokenPerClient'
  | 'tokenPerIp'
  | 'userinfoPerIp'
  | 'introspectPerClient'
  | 'introspectPerIp'
  | 'revokePerClient'
  | 'revokePerIp';

/** Limits that count failures, reserved before the attempt is evaluated (`reserve`). */
export type FailureLimitName = 'userCodePerUser' | 'userCodePerIp' | 'signInPerAccountIp' | 'signInPerIp' | 'signInPerAccount';

/**
 * Request limits that many clients share (an app's budget): past them, each network keeps a share
 * (`consumeShared`), so that the heaviest senders are the ones refused.
 */
export type SharedLimitName = 'deviceCodePerClient' | 'tokenPerClient' | 'introspectPerClient' | 'revokePerClient';

export type LimitName = RequestLimitName | FailureLimitName;

export type Limits = Readonly<Record<LimitName, Limit | null>>;

export type Verdict = { limited: false } | { limited: true; retryAfterSeconds: number };

const ALLOWED: Verdict = { limited: false };

/** The start of the fixed window `atMs` falls in, in milliseconds. */
function windowStartOf(limit: Limit, atMs: number): number {
  const windowMs = limit.windowSeconds * 1000;
  return Math.floor(atMs / windowMs) * windowMs;
}

/** Whole seconds until the window that began at `startMs` ends, at least 1. */
function retryAfterSecondsOf(limit: Limit, startMs: number, atMs: number): number {
  return Math.max(1, Math.ceil((startMs + limit.windowSeconds * 1000 - atMs) / 1000));
}

/**
 * Limits of at least this many hits per window are counted in memory and flushed to the shared
 * store every FLUSH_INTERVAL_MS, so that a busy app's polls cost no extra round trip and never
 * queue on one counter row. Across instances such a limit holds within what they admit in one
 * flush interval. Smaller limits (device codes per address) are counted exactly in the store.
 */
export const BUFFERED_FROM = 1000;
const FLUSH_INTERVAL_MS = 250;
const MAX_DEFERRED_REFUNDS = 10_000;
/** The share of a spent shared budget that each network keeps, unless configured. */
const DEFAULT_NETWORK_SHARE = 0.001;
/** Networks counted per shared limit in one window; past it an uncounted network counts as light. */
const MAX_NETWORKS_COUNTED = 100_000;

interface LocalCount {
  key: string;
  windowStart: Date;
  /** windowStart as a number, compared on every request without a Date. */
  windowStartMs: number;
  windowSeconds: number;
  /** Hits counted here and not yet in the store. */
  unflushed: number;
  /** The store's count at the last flush, ours included. */
  known: number;
}

interface ReservedHit {
  name: FailureLimitName;
  key: string;
  windowStart: Date;
  windowSeconds: number;
  /** The window's hits with this one: the reservation's place in the queue. */
  hits: number;
  max: number;
  retryAfterSeconds: number;
}

/**
 * One attempt counted against several failure limits before it is evaluated. Counting first is
 * what makes a limit hold under concurrency: of N attempts sent at once, each learns its own
 * place from one atomic increment, and only the first `max` are evaluated. An attempt that
 * turns out not to be a failure (a right code, a right password), or that is refused without
 * being evaluated, gives its places back with `refund`.
 */
export class Reservation {
  #refunded = false;

  constructor(
    private readonly store: CounterStore,
    private readonly reserved: readonly ReservedHit[],
    /** Takes a refund the store could not take now, to try again later. */
    private readonly deferRefund: (hit: ReservedHit) => void,
  ) {}

  /** Whether this attempt is past the named limit (an unconfigured limit never is). */
  over(name: FailureLimitName): boolean {
    const hit = this.reserved.find((r) => r.name === name);
    return hit !== undefined && hit.hits > hit.max;
  }

  /** The window's failures before this attempt, for the named limit (0 when unconfigured). */
  earlierFailures(name: FailureLimitName): number {
    return (this.reserved.find((r) => r.name === name)?.hits ?? 1) - 1;
  }

  /** Limited when past any of the named limits, with the longest wait among them. */
  verdict(names: readonly FailureLimitName[] = this.reserved.map((r) => r.name)): Verdict {
    const over = this.reserved.filter((r) => names.includes(r.name) && r.hits > r.max);
    if (over.length === 0) return ALLOWED;
    return { limited: true, retryAfterSeconds: Math.max(...over.map((r) => r.retryAfterSeconds)) };
  }

  /**
   * Gives back every place this attempt took (but those of the `keep` limits); once. A refund the store cannot take now (the
   * database is away: the very failure that stopped the attempt) is tried again at the next
   * flushes, so that an outage does not turn a user's retries into wrong guesses.
   */
  async refund(keep: readonly FailureLimitName[] = []): Promise<void> {
    if (this.#refunded) return;
    this.#refunded = true;
    await Promise.all(
      this.reserved.filter((r) => !keep.includes(r.name)).map((r) => this.store.refund(r.key, r.windowStart, r.windowSeconds).catch(() => this.deferRefund(r))),
    );
  }
}

/**
 * Fixed-window limits over a shared counter store. `consume` counts every request (device code
 * and token requests); `reserve` counts an attempt that may fail (user codes, sign-in) before it
 * is evaluated, and the caller refunds it unless it failed: a person who gets it right is never
 * slowed down, and concurrency cannot slip attempts past the limit.
 */
export class RateLimiter {
  /** The in-memory counts, by limit and subject: no key is built per request (the hot paths count three or four). */
  readonly #local = new Map<RequestLimitName, Map<string, LocalCount>>();
  #flushTimer: NodeJS.Timeout | null = null;
  #flushing: Promise<void> = Promise.resolve();
  /** The latest time a caller passed in: windows that ended before it are forgotten. */
  #latest = 0;
  /** Refunds the store could not take yet; bounded, since an outage can last. */
  readonly #deferredRefunds: ReservedHit[] = [];
  /** Per shared limit, the current window's hits per app and network (in this instance's memory). */
  readonly #networks = new Map<SharedLimitName, { windowStart: number; counted: number; hits: Map<string, Map<string, number>> }>();

  constructor(
    private readonly store: CounterStore,
    private readonly limits: Limits,
    /** The fraction of a spent shared budget that each network may still use in the window. */
    private readonly networkShare: number = DEFAULT_NETWORK_SHARE,
  ) {}

  #window(limit: Limit, now: Date): { start: Date; retryAfterSeconds: number } {
    const start = windowStartOf(limit, now.getTime());
    return { start: new Date(start), retryAfterSeconds: retryAfterSecondsOf(limit, start, now.getTime()) };
  }

  /**
   * Counts this request and says whether it is over the limit: synchronously for a limit counted
   * in memory (no promise on the hot paths, where both token limits are), else a promise of the
   * store's answer.
   */
  consume(name: RequestLimitName, subject: string, now: Date): Verdict | Promise<Verdict> {
    const limit = this.limits[name];
    if (!limit) return ALLOWED;
    const nowMs = now.getTime();
    if (nowMs > this.#latest) this.#latest = nowMs;
    if (limit.max < BUFFERED_FROM) {
      const window = this.#window(limit, now);
      return this.store
        .hit(`${name}:${subject}`, window.start, limit.windowSeconds)
        .then((hits): Verdict => (hits > limit.max ? { limited: true, retryAfterSeconds: window.retryAfterSeconds } : ALLOWED));
    }
    // The in-memory path runs on every poll and refresh: a number compared, no Date or key made
    // unless a window begins, and the wait worked out only for a refusal.
    const start = windowStartOf(limit, nowMs);
    let subjects = this.#local.get(name);
    if (!subjects) {
      subjects = new Map();
      this.#local.set(name, subjects);
    }
    let local = subjects.get(subject);
    if (!local || local.windowStartMs !== start) {
      local = { key: `${name}:${subject}`, windowStart: new Date(start), windowStartMs: start, windowSeconds: limit.windowSeconds, unflushed: 0, known: 0 };
      subjects.set(subject, local);
    }
    local.unflushed++;
    this.#scheduleFlush();
    if (local.known + local.unflushed <= limit.max) return ALLOWED;
    return { limited: true, retryAfterSeconds: retryAfterSecondsOf(limit, start, nowMs) };
  }

  /**
   * Counts a request against a budget that many clients share (an app's), and against each
   * network the client belongs to (`addressPrefixes`: its address or /64, and the /24, /56 and /48
   * around it). Below the budget everyone is answered. Once it is spent, a request is refused only
   * if one of its networks has already sent more than its share of the budget in this window
   * (`networkShare` of it, at least 1): the heaviest senders are refused, while a device polling at
   * its interval from a network of its own keeps its answers. What the app admits past its budget
   * is then bounded by the number of networks sending times the share: a thousand networks at the
   * default share of 1/1000 can add at most one budget more.
   *
   * The networks' counts are kept in this instance's memory only (no round trip, no row per
   * network): with several instances each judges its own share of the traffic. The app's count is
   * shared as `consume` shares it.
   */
  consumeShared(name: SharedLimitName, subject: string, networks: readonly string[], now: Date): Verdict | Promise<Verdict> {
    const limit = this.limits[name];
    if (!limit) return ALLOWED;
    const heaviest = this.#countNetworks(name, limit, subject, networks, now);
    const share = Math.max(1, Math.floor(limit.max * this.networkShare));
    const judged = (verdict: Verdict): Verdict => (verdict.limited && heaviest > share ? verdict : ALLOWED);
    const verdict = this.consume(name, subject, now);
    return verdict instanceof Promise ? verdict.then(judged) : judged(verdict);
  }

  /** Counts a hit for each of the app's networks in the window; returns the heaviest one's hits. */
  #countNetworks(name: SharedLimitName, limit: Limit, subject: string, networks: readonly string[], now: Date): number {
    const windowStart = windowStartOf(limit, now.getTime());
    let window = this.#networks.get(name);
    if (!window || window.windowStart !== windowStart) {
      // A new window: the last one's counts are forgotten all at once.
      window = { windowStart, counted: 0, hits: new Map() };
      this.#networks.set(name, window);
    }
    let ofSubject = window.hits.get(subject);
    if (!ofSubject) {
      ofSubject = new Map();
      window.hits.set(subject, ofSubject);
    }
    let heaviest = 0;
    for (const network of networks) {
      const earlier = ofSubject.get(network);
      if (earlier === undefined) {
        if (window.counted >= MAX_NETWORKS_COUNTED) {
          heaviest = Math.max(heaviest, 1);
          continue;
        }
        window.counted++;
      }
      const hits = (earlier ?? 0) + 1;
      ofSubject.set(network, hits);
      if (hits > heaviest) heaviest = hits;
    }
    return heaviest;
  }

  /** Counts one attempt against each named failure limit, atomically, before it is evaluated. */
  async reserve(subjects: ReadonlyArray<readonly [FailureLimitName, string]>, now: Date): Promise<Reservation> {
    this.#latest = Math.max(this.#latest, now.getTime());
    const reserved = await Promise.all(
      subjects.flatMap(([name, subject]) => {
        const limit = this.limits[name];
        if (!limit) return [];
        const window = this.#window(limit, now);
        const key = `${name}:${subject}`;
        return [
          this.store.hit(key, window.start, limit.windowSeconds).then(
            (hits): ReservedHit => ({
              name,
              key,
              windowStart: window.start,
              windowSeconds: limit.windowSeconds,
              hits,
              max: limit.max,
              retryAfterSeconds: window.retryAfterSeconds,
            }),
          ),
        ];
      }),
    );
    return new Reservation(this.store, reserved, (hit) => {
      if (this.#deferredRefunds.length < MAX_DEFERRED_REFUNDS) this.#deferredRefunds.push(hit);
      this.#scheduleFlush();
    });
  }

  #scheduleFlush(): void {
    if (this.#flushTimer) return;
    this.#flushTimer = setTimeout(() => {
      this.#flushTimer = null;
      void this.flush();
    }, FLUSH_INTERVAL_MS);
    this.#flushTimer.unref();
  }

  /**
   * Sends the buffered counts to the shared store and learns the other instances' counts: one
   * round trip for the counters with new hits and one for the rest, however many there are (a
   * per-address limit has a counter per address).
   */
  flush(): Promise<void> {
    this.#flushing = this.#flushing.then(async () => {
      const counted: LocalCount[] = [];
      const quiet: LocalCount[] = [];
      for (const subjects of this.#local.values()) {
        for (const [subject, local] of subjects) {
          if (local.unflushed > 0) counted.push(local);
          else if (local.windowStartMs + local.windowSeconds * 1000 <= this.#latest) subjects.delete(subject);
          else quiet.push(local);
        }
      }
      const batch = counted.map((local) => ({ key: local.key, windowStart: local.windowStart, windowSeconds: local.windowSeconds, hits: local.unflushed }));
      for (const local of counted) local.unflushed = 0;
      try {
        const totals = await this.store.hitMany(batch);
        for (const local of counted) local.known = totals.get(local.key) ?? local.known;
      } catch {
        // The store is away: keep the hits for the next flush rather than lose them.
        counted.forEach((local, i) => {
          local.unflushed += batch[i]!.hits;
        });
      }
      await this.#retryDeferredRefunds();
      try {
        // With nothing new to add, still learn what the other instances counted.
        const totals = await this.store.readMany(quiet);
        for (const local of quiet) local.known = Math.max(local.known, totals.get(local.key) ?? 0);
      } catch {
        // The store is away: the counts known so far stand until the next flush.
      }
    });
    return this.#flushing;
  }

  async #retryDeferredRefunds(): Promise<void> {
    const due = this.#deferredRefunds.splice(0);
    for (const [index, hit] of due.entries()) {
      // A window that has ended counts nothing any more: its refund is moot.
      if (hit.windowStart.getTime() + hit.windowSeconds * 1000 <= this.#latest) continue;
      try {
        await this.store.refund(hit.key, hit.windowStart, hit.windowSeconds);
      } catch {
        // Still away: the rest wait for the next flush rather than each wait for a failure.
        this.#deferredRefunds.push(...due.slice(index));
        break;
      }
    }
    if (this.#deferredRefunds.length > 0) this.#scheduleFlush();
  }

  async close(): Promise<void> {
    if (this.#flushTimer) clearTimeout(this.#flushTimer);
    this.#flushTimer = null;
    await this.flush();
  }
}
