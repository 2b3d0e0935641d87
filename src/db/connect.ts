import { mkdirSync } from 'node:fs';
import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import type { DB } from './schema.js';
import { PGliteDialect } from './pglite-dialect.js';
import { runCompiledStatementsDirectly } from './compiled-statement.js';
import { directQuery, preparingPool } from './prepared-statements.js';
import { DatabaseUnavailableError } from './unavailable.js';
import { lockDataDir, type DataDirLock } from './data-dir-lock.js';
import { PostgresChannelListener, type ChannelSubscriber, type ChannelSubscription } from './channels.js';

export type { ChannelSubscriber, ChannelSubscription } from './channels.js';

export type Database = Kysely<DB>;

export interface DatabaseHandle {
  db: Database;
  kind: 'postgres' | 'embedded';
  /** Connections in use and waiting, for metrics; null where there is no pool. */
  poolStats(): { total: number; idle: number; waiting: number } | null;
  /**
   * Hears the NOTIFY announcements of a channel until the subscription is closed (close() closes
   * any left). Resolves once the first attempt to listen has ended; the subscriber is told when
   * it listens and when it stops, since announcements made in between are never delivered.
   */
  listen(channel: string, subscriber: ChannelSubscriber): Promise<ChannelSubscription>;
  close(): Promise<void>;
}

export interface ConnectOptions {
  databaseUrl?: string | undefined;
  /** Folder of the embedded database; 'memory://' keeps it in memory (tests). */
  dataDir: string;
  poolSize?: number;
  /** Named (server-side prepared) statements on PostgreSQL; default true. */
  preparedStatements?: boolean;
}

/**
 * A pg client whose failure to connect is a DatabaseUnavailableError (db/unavailable.ts): the pool
 * calls connect once per new connection, and every path to a connection goes through it (Kysely's
 * pool.connect, the preparing pool's, and pool.query of the direct statements). A reused
 * connection never calls it, so a query costs nothing more.
 */
class ConnectionTaggingClient extends pg.Client {
  override connect(): Promise<pg.Client>;
  override connect(callback: (error: Error | null, client?: pg.Client) => void): void;
  // biome-ignore lint/suspicious/noConfusingVoidType: the implementation of pg.Client's two overloads above, which return void with a callback.
  override connect(callback?: (error: Error | null, client?: pg.Client) => void): Promise<pg.Client> | void {
    if (!callback) {
      return super.connect().catch((error: unknown) => {
        throw new DatabaseUnavailableError(error);
      });
    }
    super.connect((error: Error | null, client?: pg.Client) => callback(error ? new DatabaseUnavailableError(error) : null, client));
  }
}

/** Fail fast while the database is away instead of queueing requests forever. */
const CONNECTION_TIMEOUT_MS = 5000;
const IDLE_TIMEOUT_MS = 30_000;

/**
 * Keeps Node's timer lists for the pool's two timeouts in being while the pool lives. pg-pool
 * starts a timer on nearly every query (the idle timeout when a connection is released, the
 * connection timeout when one is asked for) and clears it moments later. Node keeps one list per
 * duration in a priority queue and drops a list the moment its last timer is cleared, so under
 * load each query built a list, queued it and took it out again: 1.5-2 µs of a poll's 150-180 µs
 * of server CPU (a CPU profile of `bench:probe server --hot-statement database`: `insert` and
 * `unenroll` of node:internal/timers; with a lasting timer of the same duration, a seventh of it).
 * One idle interval per duration keeps each list, and the queue, as they are.
 */
function keepPoolTimerListsAlive(): () => void {
  const keepers = [CONNECTION_TIMEOUT_MS, IDLE_TIMEOUT_MS].map((ms) => setInterval(() => {}, ms).unref());
  return () => {
    for (const keeper of keepers) clearInterval(keeper);
  };
}

export async function connectDatabase(options: ConnectOptions): Promise<DatabaseHandle> {
  if (options.databaseUrl) {
    const pool = new pg.Pool({
      connectionString: options.databaseUrl,
      max: options.poolSize ?? 10,
      connectionTimeoutMillis: CONNECTION_TIMEOUT_MS,
      idleTimeoutMillis: IDLE_TIMEOUT_MS,
      Client: ConnectionTaggingClient,
    });
    const stopKeepingTimerLists = keepPoolTimerListsAlive();
    // An idle client that loses its server must not crash the process; the next query reconnects.
    pool.on('error', () => {});
    // Nor may a checked-out one: pg-pool listens for errors on idle clients only, and a client
    // emits 'error' when its server goes away (pg_ctl stop, a restart, a dropped connection) while
    // it is lent out, even in the middle of a query. The query or transaction in progress fails
    // on its own (and answers 503, see db/unavailable.ts); the client, no longer queryable, is
    // discarded by the pool when it is released.
    pool.on('connect', (client) => client.on('error', () => {}));
    const prepared = options.preparedStatements !== false;
    const db = new Kysely<DB>({ dialect: new PostgresDialect({ pool: prepared ? preparingPool(pool) : pool }) });
    runCompiledStatementsDirectly(db, directQuery(pool, prepared));
    const listeners = new Set<PostgresChannelListener>();
    const databaseUrl = options.databaseUrl;
    return {
      db,
      kind: 'postgres',
      poolStats: () => ({ total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount }),
      async listen(channel, subscriber) {
        const listener = new PostgresChannelListener(databaseUrl, channel, subscriber);
        listeners.add(listener);
        await listener.start();
        return {
          close: async () => {
            listeners.delete(listener);
            await listener.close();
          },
        };
      },
      async close() {
        await Promise.all([...listeners].map((listener) => listener.close()));
        listeners.clear();
        stopKeepingTimerLists();
        await db.destroy();
      },
    };
  }
  const { PGlite } = await import('@electric-sql/pglite');
  let pglite;
  let lock: DataDirLock | null = null;
  if (options.dataDir === 'memory://') {
    pglite = new PGlite();
  } else {
    mkdirSync(options.dataDir, { recursive: true });
    // Before PGlite reads a byte: a second owner is refused having written nothing.
    lock = lockDataDir(options.dataDir);
    try {
      pglite = new PGlite(options.dataDir);
      await pglite.waitReady;
    } catch (error) {
      lock.release();
      throw error;
    }
  }
  const db = new Kysely<DB>({ dialect: new PGliteDialect(pglite) });
  const stopHearing = new Set<() => void>();
  const embedded = pglite;
  return {
    db,
    kind: 'embedded',
    poolStats: () => null,
    // One connection, never lost: listening starts once and lasts until closed. Not PGlite's
    // listen(), which runs its LISTEN outside our dialect's queue and so may run it inside
    // another borrower's transaction, where a rollback would undo it; the LISTEN goes through
    // Kysely instead, and onNotification only adds the callback.
    async listen(channel, subscriber) {
      const off = embedded.onNotification((heard, payload) => {
        if (heard === channel) subscriber.onNotification(payload);
      });
      stopHearing.add(off);
      try {
        await sql`LISTEN ${sql.id(channel)}`.execute(db);
      } catch (error) {
        off();
        stopHearing.delete(off);
        throw error;
      }
      subscriber.onListening();
      return {
        close: async () => {
          off();
          stopHearing.delete(off);
        },
      };
    },
    close: async () => {
      for (const off of stopHearing) off();
      stopHearing.clear();
      await db.destroy();
      lock?.release();
    },
  };
}
