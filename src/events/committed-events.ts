import { type Selectable, sql, type Transaction } from 'kysely';
import type { Database } from '../db/connect.js';
import type { DB, EventsTable } from '../db/schema.js';

/**
 * The event log's horizon: every event of a transaction below it has committed (or never will),
 * so a consumer may take it and pass it by for good. It is the oldest transaction still running
 * in the current snapshot, leaving out those that pg_stat_activity shows in another database of
 * the server (they cannot write to this log), or the snapshot's xmax when none is left.
 * pg_snapshot_xmin alone would be every transaction of the server: a long one in another
 * database would hold delivery back here. A running transaction not shown there (a prepared
 * one, or one the database user may not see) counts as this database's: delay, never loss.
 * The match is on the 32-bit xid pg_stat_activity shows; ids of running transactions are far
 * closer together than 2^32.
 */
export const eventHorizon = sql<string>`(
  SELECT coalesce(
    (
      SELECT min(running) FROM pg_snapshot_xip(s.snapshot) AS running
      WHERE running::text::bigint % 4294967296 NOT IN (
        SELECT backend_xid::text::bigint FROM pg_stat_activity
        WHERE backend_xid IS NOT NULL AND datname <> current_database()
      )
    ),
    pg_snapshot_xmax(s.snapshot)
  )
  FROM (SELECT pg_current_snapshot() AS snapshot) s
)`;

/** An event as a consumer receives it: the row without its transaction's id. */
export type CommittedEvent = Omit<Selectable<EventsTable>, 'transaction_id'>;

/**
 * Hands the next committed events (at most `limit`) of the log to a consumer that carries them out
 * of the server (webhook deliveries, Shared Signals streams), in one transaction with the advance
 * of that consumer's cursor: `take` writes its own rows (its deliveries) in `trx`, so that either
 * both commit or neither does, and every event reaches the consumer exactly once.
 *
 * Event ids are drawn when a row is inserted, not when its transaction commits, so a cursor on the
 * id alone could pass over an event whose transaction committed late. Only events of transactions
 * below the horizon (eventHorizon: older than every transaction of this database still running)
 * are taken, in (transaction_id, event_id) order: once such a transaction is seen, no event of it
 * or of an older one can still appear. A long transaction of this database delays delivery,
 * never loses it.
 *
 * One instance at a time: the cursor's row is locked with SKIP LOCKED, so an instance that finds
 * it taken returns 0 at once instead of waiting. A new consumer starts at the present.
 * Returns the number of events handed over.
 */
export async function takeCommittedEvents(
  db: Database,
  consumer: string,
  limit: number,
  take: (trx: Transaction<DB>, events: readonly CommittedEvent[]) => Promise<void>,
): Promise<number> {
  // Locking the cursor's row is a write (and draws a transaction id), so an idle round that found
  // nothing would still write every interval: a read-only look comes first.
  if (!(await hasEventsFor(db, consumer))) return 0;
  return db.transaction().execute(async (trx) => {
    await startConsumer(trx, consumer);
    const cursor = (
      await sql<{ transaction_id: string; event_id: string }>`
        SELECT transaction_id::text AS transaction_id, event_id::text AS event_id FROM event_cursors
        WHERE consumer = ${consumer} FOR UPDATE SKIP LOCKED`.execute(trx)
    ).rows[0];
    if (!cursor) return 0;
    const events = (
      await sql<CommittedEvent & { transaction_id: string }>`
        -- ORDER BY names the table's columns: the output's event_id is text, which sorts "10" before "9".
        SELECT event_id::text AS event_id, type, grant_id, user_id, client_id, reason, client_ip, created_at, data, actor,
               transaction_id::text AS transaction_id
        FROM events
        WHERE (transaction_id, event_id) > (${cursor.transaction_id}::xid8, ${cursor.event_id}::bigint)
          AND transaction_id < ${eventHorizon}
        ORDER BY events.transaction_id, events.event_id
        LIMIT ${limit}`.execute(trx)
    ).rows;
    const last = events.at(-1);
    if (!last) return 0;
    await take(
      trx,
      events.map(({ transaction_id: _, ...event }) => event),
    );
    await sql`
      UPDATE event_cursors SET transaction_id = ${last.transaction_id}::xid8, event_id = ${last.event_id}::bigint
      WHERE consumer = ${consumer}`.execute(trx);
    return events.length;
  });
}

/** Whether the consumer has no cursor yet, or committed events past it: a read that locks and writes nothing. */
async function hasEventsFor(db: Database, consumer: string): Promise<boolean> {
  const { rows } = await sql<{ pending: boolean }>`
    SELECT NOT EXISTS (SELECT 1 FROM event_cursors WHERE consumer = ${consumer})
        OR EXISTS (
          SELECT 1 FROM event_cursors c
          JOIN events e ON (e.transaction_id, e.event_id) > (c.transaction_id, c.event_id)
          WHERE c.consumer = ${consumer} AND e.transaction_id < ${eventHorizon}
        ) AS pending`.execute(db);
  return rows[0]?.pending === true;
}

/**
 * Makes sure a consumer's cursor exists, starting at the present, in the caller's transaction:
 * called when a consumer gains its first subscriber (a webhook registered before any instance
 * took events), so that events committed after it are handed over, the caller's own included.
 * With `restart`, a cursor that exists moves to the present too: for a consumer whose cursor
 * waited while it had no subscriber, so that what happened meanwhile is passed over.
 */
export async function startConsumer(db: Transaction<DB>, consumer: string, { restart = false } = {}): Promise<void> {
  await sql`
    INSERT INTO event_cursors (consumer, transaction_id, event_id)
    VALUES (${consumer}, ${eventHorizon}, 0)
    ON CONFLICT (consumer) ${restart ? sql`DO UPDATE SET transaction_id = excluded.transaction_id, event_id = 0` : sql`DO NOTHING`}`.execute(db);
}
