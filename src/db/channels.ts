import { randomBytes } from 'node:crypto';
import pg from 'pg';

/** What a subscriber to a channel of NOTIFY announcements hears (DatabaseHandle.listen). */
export interface ChannelSubscriber {
  /** An announcement on the channel, delivered after the transaction that made it committed. */
  onNotification(payload: string): void;
  /** Listening from now on, at the start or again after a loss: anything may have changed while not. */
  onListening(): void;
  /** Listening stopped (its connection was lost): announcements are missed until onListening. */
  onListeningLost(reason: unknown): void;
}

export interface ChannelSubscription {
  close(): Promise<void>;
}

/** Waits before reconnecting after a loss or a failed attempt, doubling from the first to the last. */
const FIRST_RETRY_MS = 1_000;
const LAST_RETRY_MS = 8_000;
/** Up to this share more, at random, so that instances cut off together do not return in step. */
const RETRY_JITTER = 0.25;
/** As the pool's: an attempt against an unreachable database fails instead of hanging. */
const CONNECT_TIMEOUT_MS = 5_000;
/**
 * How often a listening connection proves that it still hears: it announces on a channel only it
 * listens to, and must hear that back within PROBE_TIMEOUT_MS or count as lost. Without it a
 * connection dropped without a word (no FIN, no RST: a dead NAT entry, a partitioned network)
 * could stay deaf for the minutes TCP keepalive takes, and one through a pooler in transaction
 * mode (where a LISTEN does not outlive its transaction) forever, while the cache was trusted.
 */
export const PROBE_EVERY_MS = 5_000;
export const PROBE_TIMEOUT_MS = 5_000;
/** close() waits at most this for the server to see the session end; shutdown has a bound. */
const CLOSE_WAIT_MS = 2_000;
/** In pg_stat_activity, so that an operator can tell it from the pool's sessions. */
export const LISTENER_APPLICATION_NAME = 'device-auth listener';

/**
 * LISTEN on a PostgreSQL connection of its own: a pooled one returns to the pool and is reused
 * or closed by it, and would take its LISTEN along. When the connection is lost (the database
 * restarted, the backend was terminated), the subscriber is told at once and the listener
 * connects again with a bounded back-off, forever, until closed. Nothing here throws or emits an
 * unhandled error: a database that goes away must not end the process.
 */
export class PostgresChannelListener implements ChannelSubscription {
  #client: pg.Client | null = null;
  #retry: NodeJS.Timeout | null = null;
  #failures = 0;
  #closed = false;

  constructor(
    private readonly connectionString: string,
    private readonly channel: string,
    private readonly subscriber: ChannelSubscriber,
  ) {}

  /** Resolves when the first attempt has ended: listening, or retrying in the background. */
  start(): Promise<void> {
    return this.#attempt();
  }

  async close(): Promise<void> {
    this.#closed = true;
    if (this.#retry) clearTimeout(this.#retry);
    this.#retry = null;
    const client = this.#client;
    this.#client = null;
    if (!client) return;
    let timer: NodeJS.Timeout | undefined;
    const bound = new Promise<void>((resolve) => (timer = setTimeout(resolve, CLOSE_WAIT_MS)));
    await Promise.race([client.end().catch(() => {}), bound]);
    clearTimeout(timer);
  }

  async #attempt(): Promise<void> {
    this.#retry = null;
    if (this.#closed) return;
    const client = new pg.Client({
      connectionString: this.connectionString,
      connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
      query_timeout: PROBE_TIMEOUT_MS,
      keepAlive: true,
      application_name: LISTENER_APPLICATION_NAME,
    });
    this.#client = client;
    const probeChannel = `listener_probe_${randomBytes(8).toString('hex')}`;
    let listening = false;
    let lost = false;
    let probing: NodeJS.Timeout | undefined;
    let unanswered: { payload: string; deadline: NodeJS.Timeout } | null = null;
    // A lost connection may say so by 'error', by 'end', by a failed connect, LISTEN or probe, or
    // by a probe not heard back: the first of them counts, once.
    const onLost = (reason: unknown) => {
      if (lost) return;
      lost = true;
      clearInterval(probing);
      if (unanswered) clearTimeout(unanswered.deadline);
      if (this.#client === client) this.#client = null;
      client.end().catch(() => {});
      if (this.#closed) return;
      if (listening) this.subscriber.onListeningLost(reason);
      this.#scheduleRetry();
    };
    client.on('error', onLost);
    client.on('end', () => onLost(new Error('Connection terminated')));
    client.on('notification', (message) => {
      const awaited = unanswered;
      if (message.channel === this.channel) this.subscriber.onNotification(message.payload ?? '');
      else if (message.channel === probeChannel && awaited && message.payload === awaited.payload) {
        clearTimeout(awaited.deadline);
        unanswered = null;
      }
    });
    const probe = () => {
      if (unanswered) return;
      const payload = randomBytes(8).toString('hex');
      const deadline = setTimeout(() => onLost(new Error(`the listener did not hear its own probe within ${PROBE_TIMEOUT_MS} ms`)), PROBE_TIMEOUT_MS);
      deadline.unref();
      unanswered = { payload, deadline };
      client.query('SELECT pg_notify($1, $2)', [probeChannel, payload]).catch(onLost);
    };
    try {
      await client.connect();
      await client.query(`LISTEN ${client.escapeIdentifier(this.channel)}; LISTEN ${client.escapeIdentifier(probeChannel)}`);
    } catch (error) {
      onLost(error);
      return;
    }
    if (lost) return;
    if (this.#closed) {
      await client.end().catch(() => {});
      return;
    }
    listening = true;
    this.#failures = 0;
    probing = setInterval(probe, PROBE_EVERY_MS);
    probing.unref();
    this.subscriber.onListening();
  }

  #scheduleRetry(): void {
    const base = Math.min(FIRST_RETRY_MS * 2 ** this.#failures, LAST_RETRY_MS);
    this.#failures = Math.min(this.#failures + 1, 16);
    this.#retry = setTimeout(() => void this.#attempt(), base * (1 + Math.random() * RETRY_JITTER));
    // The server's sockets keep the process alive, never a pending reconnection.
    this.#retry.unref();
  }
}
