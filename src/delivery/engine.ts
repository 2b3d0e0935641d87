import { performance } from 'node:perf_hooks';
import type { Logger } from 'pino';
import type { Database } from '../db/connect.js';
import { describeUnavailable, isDatabaseUnavailable } from '../db/unavailable.js';
import { addSeconds, type Clock } from '../lib/clock.js';
import { type NewEvent, recordEvents } from '../events/event-log.js';
import { type OutboundAnswer, type OutboundPostOptions, postOutbound } from '../lib/outbound-post.js';
import {
  type ClaimedDelivery,
  claimDeliveries,
  holdTarget,
  noteTargetFailed,
  postponeTargetBacklog,
  recordFailedAttempt,
  recordDelivered,
  releaseDeliveries,
} from '../repositories/outbound-deliveries.js';
import { maxAttempts, retryDelaySeconds } from './schedule.js';

/** A message as a kind renders it: one row of outbound_deliveries. */
export type Delivery = ClaimedDelivery;

/** What the engine sends for a delivery: a POST of `body` with `headers` to `url`. */
export interface OutboundRequest {
  url: string;
  headers: Readonly<Record<string, string>>;
  body: string;
}

/**
 * What a delivery can no longer carry: its event was purged (EVENT_RETENTION_DAYS) before it
 * could be sent. The message is given up without a request, and the rest of its chain goes on.
 */
export interface Gone {
  readonly gone: 'event_purged';
}

/**
 * A kind of target (a webhook endpoint, an SSF push stream): renders a delivery as the request to
 * send, at each attempt (a signature may carry the attempt's time). Null: the target is gone or
 * paused on the kind's side; the row is left and looked at again later, without an attempt.
 */
export interface DeliveryKind {
  readonly kind: string;
  render(db: Database, delivery: Delivery): Promise<OutboundRequest | Gone | null>;
  /**
   * The event that tells the operator the engine paused one of its targets for failing since
   * `failingSince` (EVENTS_PAUSE_AFTER_HOURS), written in the pause's transaction. A pause the
   * operator or the receiver asks for writes its own.
   */
  pausedForFailingEvent(targetId: string, failingSince: Date, now: Date): NewEvent;
  /**
   * What else such a pause must leave, in the same transaction: a Shared Signals push stream's
   * stream-updated SET (SSF 1.0 §8.1.5: a transmitter that pauses a stream on its own tells the
   * receiver), queued and so held with the rest until the stream is enabled again.
   */
  afterPausedForFailing?(db: Database, targetId: string, failingSince: Date, now: Date): Promise<void>;
}

/**
 * Something that queues deliveries at each round before the engine claims: a consumer of the
 * event log that fans events out (takeCommittedEvents, then insertDeliveries in its `take`).
 * Returns how many events it took, so that a full page is followed by another at once.
 */
export interface DeliverySource {
  readonly name: string;
  feed(db: Database, now: Date): Promise<number>;
}

export interface DeliveryOptions {
  /** EVENTS_RETRY_BASE_SECONDS: the first retry's delay, doubled at each failure up to an hour. */
  retryBaseSeconds: number;
  /** A target failing this long without a success is paused, its backlog kept (EVENTS_PAUSE_AFTER_HOURS). */
  pauseAfterSeconds: number;
  /** The safe client's settings (EVENTS_ALLOW_LOOPBACK, the resolver, the timeout). */
  outbound: Omit<OutboundPostOptions, 'signal'>;
  /** Between rounds when nothing wakes the engine sooner. */
  intervalMs?: number;
  /** Chains of one target in flight at once, across instances. */
  perTarget?: number;
  /** Messages of one chain claimed and sent together, in order. */
  chainLength?: number;
  /** Chains in flight in this process, all targets together. */
  inFlight?: number;
}

/** A kind that cannot render now (or an instance that does not know the kind) looks again after this. */
const RENDER_AGAIN_SECONDS = 60;
/** Retries fall due and claims expire without anything waking the engine: it claims at least this often. */
const CLAIM_AT_LEAST_EVERY_MS = 1000;
/** Pages of events a source may take in one round, so that one round always ends. */
const FEED_PAGES_PER_ROUND = 20;
/**
 * After a round that found nothing to do (no event taken, nothing claimed, nothing in flight),
 * rounds come this often instead of every interval, until something is found or poke() comes. A
 * server with no webhook and no stream otherwise asked the database whether it had any, for each
 * source, four times a second, under load too: an idle server made 11.9 transactions a second,
 * and makes 6.3 (docs/benchmarks.md, 2026-11-27). An event written while the engine idles leaves
 * within this, not within one interval.
 */
const IDLE_ROUND_EVERY_MS = 1000;

/**
 * The outbound delivery engine (issue 32), shared by webhooks and Shared Signals push. Every
 * instance runs it: each round feeds the sources, claims due chains (repositories/
 * outbound-deliveries.ts: in order per target and ordering key, a bounded number per target) and
 * sends each chain in a task of its own, outside any transaction and without waiting for the
 * others: a slow or dead receiver holds only its own chains, never another target's nor a
 * request of the server's. A message is at least once: a claim that its instance never finished
 * expires, and another instance sends it again.
 *
 * A failure is retried with exponential backoff (schedule.ts); a failing target gets one chain in
 * flight at a time and its backlog waits for its next probe; failing for EVENTS_PAUSE_AFTER_HOURS
 * without a success, it is paused with its backlog held until someone resumes it.
 */
export class OutboundDeliveries {
  readonly #kinds = new Map<string, DeliveryKind>();
  readonly #sources: DeliverySource[] = [];
  readonly #workers = new Set<Promise<void>>();
  #abort = new AbortController();
  readonly #maxAttempts: number;
  readonly #intervalMs: number;
  readonly #perTarget: number;
  readonly #chainLength: number;
  readonly #inFlight: number;
  #timer: NodeJS.Timeout | null = null;
  #round: Promise<void> | null = null;
  /** Whether the last round found the database away: an outage is logged once, not every round. */
  #databaseAway = false;
  #again = false;
  /** Something may have become claimable since the last claim: new messages, or a chain that ended. */
  #claimWanted = true;
  #lastClaimAt = 0;
  /** Whether the last round found nothing to do, and when it started (IDLE_ROUND_EVERY_MS). */
  #idle = false;
  #lastRoundAt = 0;

  constructor(
    private readonly db: Database,
    private readonly clock: Clock,
    private readonly log: Logger,
    private readonly options: DeliveryOptions,
  ) {
    this.#maxAttempts = maxAttempts(options.retryBaseSeconds);
    this.#intervalMs = options.intervalMs ?? 250;
    this.#perTarget = options.perTarget ?? 4;
    this.#chainLength = options.chainLength ?? 20;
    this.#inFlight = options.inFlight ?? 32;
  }

  register(kind: DeliveryKind): void {
    this.#kinds.set(kind.kind, kind);
  }

  addSource(source: DeliverySource): void {
    this.#sources.push(source);
  }

  /** Rounds every interval (every IDLE_ROUND_EVERY_MS while they find nothing to do), and at once after a chain ends or a poke, until stop(). */
  start(): void {
    if (this.#timer) return;
    this.#timer = setInterval(() => {
      if (this.#idle && performance.now() - this.#lastRoundAt < IDLE_ROUND_EVERY_MS) return;
      this.#wake();
    }, this.#intervalMs);
    this.#timer.unref();
    this.#wake();
  }

  /** Something was queued outside a source (a replay, a verification message): claim at the next round, now if running. */
  poke(): void {
    this.#claimWanted = true;
    if (this.#timer) this.#wake();
  }

  /**
   * Stops the rounds and the requests in flight; their messages are released, not counted as
   * attempts. The engine may be started (or stepped) again afterwards.
   */
  async stop(): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
    this.#abort.abort(new Error('shutting down'));
    await this.#round?.catch(() => {});
    await Promise.allSettled([...this.#workers]);
    this.#abort = new AbortController();
  }

  /**
   * One round, waiting for every chain it started: for tests and tools that step the engine by
   * hand under a clock of their own. Returns the number of messages claimed.
   */
  async runOnce(): Promise<number> {
    const started = await this.#feedAndClaim(true);
    await Promise.allSettled(started);
    return started.length === 0 ? 0 : started.length;
  }

  /** Rounds until nothing is claimed (at most `rounds`): everything due now has had its attempt. */
  async drain(rounds = 100): Promise<void> {
    for (let round = 0; round < rounds; round++) {
      if ((await this.runOnce()) === 0) return;
    }
  }

  #wake(): void {
    if (this.#abort.signal.aborted) return;
    if (this.#round) {
      this.#again = true;
      return;
    }
    this.#round = this.#feedAndClaim()
      .then(
        () => {
          this.#databaseAway = false;
        },
        (error: unknown) => {
          if (!isDatabaseUnavailable(error)) {
            this.log.warn({ err: error }, 'outbound delivery round failed');
            return;
          }
          // The database away is the readiness check's to report (it shows in /readyz): said once
          // at info per outage, as the other background loops do; the messages wait in the table.
          if (!this.#databaseAway) this.log.info(describeUnavailable(error), 'outbound delivery paused: the database is away; trying again');
          this.#databaseAway = true;
        },
      )
      .finally(() => {
        this.#round = null;
        if (this.#again) {
          this.#again = false;
          this.#wake();
        }
      });
  }

  /**
   * Feeds, claims, and starts a task per chain; returns the tasks (each one message claimed or
   * more). The feed runs every round, so that an event leaves within one interval (within a second
   * while the engine idles); the claim, the round's costly statement, runs when something may have
   * become claimable (messages queued, a chain ended) or once a second for retries that fell due
   * and claims that expired.
   */
  async #feedAndClaim(always = false): Promise<Promise<void>[]> {
    this.#lastRoundAt = performance.now();
    // Idle until this round shows otherwise; a round that fails is not idle, and is tried again soon.
    this.#idle = false;
    let taken = 0;
    for (const source of this.#sources) {
      for (let page = 0; page < FEED_PAGES_PER_ROUND; page++) {
        const events = await source.feed(this.db, this.clock.now());
        if (events === 0) break;
        taken += events;
        this.#claimWanted = true;
      }
    }
    const nothingToDo = () => taken === 0 && this.#workers.size === 0;
    if (!always && !this.#claimWanted && performance.now() - this.#lastClaimAt < CLAIM_AT_LEAST_EVERY_MS) {
      this.#idle = nothingToDo();
      return [];
    }
    this.#claimWanted = false;
    this.#lastClaimAt = performance.now();
    const room = this.#inFlight - this.#workers.size;
    if (room <= 0 || this.#abort.signal.aborted) return [];
    const now = this.clock.now();
    // Long enough for a whole chain at its slowest; a claim outlives a crashed instance by this much.
    const until = addSeconds(now, (this.#chainLength * this.options.outbound.timeoutMs) / 1000 + 30);
    const claimed = await claimDeliveries(this.db, now, until, { perTarget: this.#perTarget, chainLength: this.#chainLength, chains: room });
    this.#idle = claimed.length === 0 && nothingToDo();
    const tasks: Promise<void>[] = [];
    for (const chain of chainsOf(claimed)) {
      const task = this.#send(chain)
        .catch((error: unknown) => {
          this.log.warn(isDatabaseUnavailable(error) ? describeUnavailable(error) : { err: error }, 'outbound delivery failed');
        })
        .finally(() => {
          this.#workers.delete(task);
          this.#claimWanted = true;
          if (this.#timer) this.#wake();
        });
      this.#workers.add(task);
      tasks.push(task);
    }
    return tasks;
  }

  /** Sends a chain in order; at its first failure the rest of it is let go, to follow the failed one later. */
  async #send(chain: readonly Delivery[]): Promise<void> {
    for (const [index, delivery] of chain.entries()) {
      const remaining = chain.slice(index).map((d) => d.delivery_id);
      if (this.#abort.signal.aborted) return releaseDeliveries(this.db, remaining, null);
      const request = await this.#render(delivery);
      if (!request) return releaseDeliveries(this.db, remaining, addSeconds(this.clock.now(), RENDER_AGAIN_SECONDS));
      if ('gone' in request) {
        // Given up at once, as an attempt with its reason in the delivery log: retrying could
        // never send it, and it would hold back every later message of its chain.
        const now = this.clock.now();
        const attempt = { delivery_id: delivery.delivery_id, attempted_at: now, http_status: null, error: request.gone, duration_ms: 0 };
        await this.db.transaction().execute((trx) => recordFailedAttempt(trx, attempt, { kind: 'gave_up' }));
        continue;
      }
      const started = performance.now();
      const answer = await postOutbound(request.url, request.headers, request.body, { ...this.options.outbound, signal: this.#abort.signal });
      if ('refusal' in answer && answer.refusal === 'shutting_down') return releaseDeliveries(this.db, remaining, null);
      const delivered = await this.#record(delivery, answer, Math.round(performance.now() - started));
      if (!delivered) return releaseDeliveries(this.db, remaining.slice(1), null);
    }
  }

  async #render(delivery: Delivery): Promise<OutboundRequest | Gone | null> {
    const kind = this.#kinds.get(delivery.target_kind);
    if (!kind) return null;
    try {
      return await kind.render(this.db, delivery);
    } catch (error) {
      this.log.warn({ err: error, target_kind: delivery.target_kind, target_id: delivery.target_id }, 'a delivery could not be rendered');
      return null;
    }
  }

  /** The attempt, the row's next state and the target's health, in one statement or transaction. True when delivered. */
  async #record(delivery: Delivery, answer: OutboundAnswer, durationMs: number): Promise<boolean> {
    const delivered = 'status' in answer && answer.status >= 200 && answer.status < 300;
    const { target_kind: kind, target_id: id } = delivery;
    const attemptAt = (now: Date) => ({
      delivery_id: delivery.delivery_id,
      attempted_at: now,
      http_status: 'status' in answer ? answer.status : null,
      error: 'refusal' in answer ? answer.refusal : null,
      duration_ms: durationMs,
    });
    if (delivered) {
      await recordDelivered(this.db, attemptAt(this.clock.now()), kind, id);
      return true;
    }
    await this.db.transaction().execute(async (trx) => {
      const now = this.clock.now();
      const attempt = attemptAt(now);
      const attempts = delivery.attempts + 1;
      const base = this.options.retryBaseSeconds;
      // The target's row first: failures of two chains of one target recorded at once then wait for
      // each other there, instead of each locking its own row and then the other's (postponing the
      // backlog updates every pending row of the target), which PostgreSQL ends as a deadlock.
      const target = await noteTargetFailed(trx, kind, id, now);
      await recordFailedAttempt(
        trx,
        attempt,
        attempts >= this.#maxAttempts ? { kind: 'gave_up' } : { kind: 'retry', at: addSeconds(now, retryDelaySeconds(base, attempts)) },
      );
      if (now.getTime() - target.failing_since.getTime() >= this.options.pauseAfterSeconds * 1000) {
        if (await holdTarget(trx, kind, id, now, 'failing')) {
          const paused = this.#kinds.get(kind);
          if (paused) {
            await recordEvents(trx, [paused.pausedForFailingEvent(id, target.failing_since, now)]);
            await paused.afterPausedForFailing?.(trx, id, target.failing_since, now);
          }
          this.log.warn({ target_kind: kind, target_id: id, failing_since: target.failing_since }, 'paused a target that keeps failing; its backlog is kept');
        }
      } else {
        await postponeTargetBacklog(trx, kind, id, addSeconds(now, retryDelaySeconds(base, target.failures)));
      }
    });
    return false;
  }
}

/** Claimed rows as chains: one per target and ordering key (a row without a key alone), each oldest first. */
function chainsOf(rows: readonly Delivery[]): Delivery[][] {
  const chains = new Map<string, Delivery[]>();
  for (const row of rows) {
    const key = JSON.stringify([row.target_kind, row.target_id, row.ordering_key ?? `#${row.delivery_id}`]);
    const chain = chains.get(key) ?? [];
    chain.push(row);
    chains.set(key, chain);
  }
  for (const chain of chains.values()) chain.sort((a, b) => (BigInt(a.delivery_id) < BigInt(b.delivery_id) ? -1 : 1));
  return [...chains.values()];
}
