import { sql, type RawBuilder } from 'kysely';
import type { Database } from '../db/connect.js';
import { eventHorizon } from '../events/committed-events.js';

/** What an operator asks of the event log; every condition given must hold. */
export interface EventFilter {
  /** Any of these names of the vocabulary. */
  types?: readonly string[] | undefined;
  userId?: string | undefined;
  clientId?: string | undefined;
  grantId?: string | undefined;
  /** Only events at or after this time. */
  since?: Date | undefined;
  /** Only events before this time. */
  until?: Date | undefined;
}

/** An event as the admin API shows it, with the app's name while the app exists. */
export interface EventRow {
  event_id: string;
  type: string;
  created_at: Date;
  reason: string | null;
  grant_id: string | null;
  user_id: string | null;
  client_id: string | null;
  client_name: string | null;
  client_ip: string | null;
  data: unknown;
  actor: unknown;
}

function conditions(filter: EventFilter): RawBuilder<boolean>[] {
  const where: RawBuilder<boolean>[] = [];
  if (filter.types !== undefined) where.push(sql<boolean>`e.type = ANY (${[...filter.types]}::text[])`);
  if (filter.userId !== undefined) where.push(sql<boolean>`e.user_id = ${filter.userId}::uuid`);
  if (filter.clientId !== undefined) where.push(sql<boolean>`e.client_id = ${filter.clientId}::text`);
  if (filter.grantId !== undefined) where.push(sql<boolean>`e.grant_id = ${filter.grantId}::uuid`);
  if (filter.since !== undefined) where.push(sql<boolean>`e.created_at >= ${filter.since}::timestamptz`);
  if (filter.until !== undefined) where.push(sql<boolean>`e.created_at < ${filter.until}::timestamptz`);
  return where;
}

const all = (where: RawBuilder<boolean>[]) => (where.length === 0 ? sql<boolean>`true` : sql.join(where, sql` AND `));

// The app's name by a LEFT JOIN: the events of a deleted app (or of no app) are listed all the same.
const COLUMNS = sql`e.event_id::text AS event_id, e.type, e.created_at, e.reason, e.grant_id::text AS grant_id, e.user_id::text AS user_id,
  e.client_id, c.name AS client_name, e.client_ip, e.data, e.actor`;

/**
 * A page of events in event_id order, after `afterEventId` (keyset paging). Filters by user and
 * by grant use their indexes; by type, app or time alone the log is read in event_id order until
 * the page is full.
 */
export async function listEvents(db: Database, filter: EventFilter, page: { afterEventId?: string | undefined; limit: number }): Promise<EventRow[]> {
  const where = conditions(filter);
  if (page.afterEventId !== undefined) where.push(sql<boolean>`e.event_id > ${page.afterEventId}::bigint`);
  const result = await sql<EventRow>`
    SELECT ${COLUMNS}
    FROM events e LEFT JOIN clients c ON c.client_id = e.client_id
    WHERE ${all(where)}
    -- The table's column, not the text of the output's event_id ("10" sorts before "9").
    ORDER BY e.event_id
    LIMIT ${page.limit}`.execute(db);
  return result.rows;
}

/** Where a tail has got to in the committed order of the log: (transaction_id, event_id). */
export interface TailPosition {
  transactionId: string;
  eventId: string;
}

/**
 * The next committed events after `position` that match the filter, in the order in which they
 * can no longer be overtaken (transaction_id, event_id: see events/committed-events.ts), and the
 * position to ask from next: past the last event returned when the page is full, else past every
 * committed event read, matching or not. Without a position, the tail starts at the present as a
 * consumer's cursor sees it: after every transaction older than the oldest still running.
 * One statement: one snapshot decides both what is committed and what was returned.
 */
export async function tailEvents(
  db: Database,
  filter: EventFilter,
  position: TailPosition | null,
  limit: number,
): Promise<{ events: EventRow[]; position: TailPosition }> {
  const from = position === null ? sql`(h.xmin, 0::bigint)` : sql`(${position.transactionId}::xid8, ${position.eventId}::bigint)`;
  const result = await sql<EventRow & { transaction_id: string; kind: 'event' | 'horizon' }>`
    WITH h AS MATERIALIZED (SELECT ${eventHorizon} AS xmin),
    matched AS (
      SELECT ${COLUMNS}, e.transaction_id
      FROM h, events e LEFT JOIN clients c ON c.client_id = e.client_id
      WHERE (e.transaction_id, e.event_id) > ${from} AND e.transaction_id < h.xmin AND ${all(conditions(filter))}
      ORDER BY e.transaction_id, e.event_id
      LIMIT ${limit}
    ),
    last_read AS (
      SELECT e.transaction_id, e.event_id FROM h, events e
      WHERE (e.transaction_id, e.event_id) > ${from} AND e.transaction_id < h.xmin
      ORDER BY e.transaction_id DESC, e.event_id DESC
      LIMIT 1
    )
    SELECT 'event' AS kind, m.event_id, m.type, m.created_at, m.reason, m.grant_id, m.user_id, m.client_id, m.client_name, m.client_ip,
           m.data, m.actor, m.transaction_id::text AS transaction_id
    FROM matched m
    UNION ALL
    -- Where reading ends when the page is not full: the last committed event read, or where it started.
    SELECT 'horizon', coalesce(l.event_id::text, ${position === null ? sql`'0'` : sql`${position.eventId}::text`}), NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
           NULL, NULL, coalesce(l.transaction_id, ${position === null ? sql`h.xmin` : sql`${position.transactionId}::xid8`})::text
    FROM h LEFT JOIN last_read l ON true`.execute(db);
  // A UNION keeps no order of its own: the events are put back in committed order here.
  const events = result.rows
    .filter((row) => row.kind === 'event')
    .sort((a, b) => compareBigints(a.transaction_id, b.transaction_id) || compareBigints(a.event_id, b.event_id));
  const horizon = result.rows.find((row) => row.kind === 'horizon')!;
  const last = events.length === limit ? events.at(-1)! : horizon;
  return {
    events: events.map(({ kind: _, transaction_id: __, ...event }) => event),
    position: { transactionId: last.transaction_id, eventId: last.event_id },
  };
}

function compareBigints(a: string, b: string): number {
  const x = BigInt(a);
  const y = BigInt(b);
  return x < y ? -1 : x > y ? 1 : 0;
}
