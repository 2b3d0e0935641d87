import { sql, type Insertable, type RawBuilder, type Transaction } from 'kysely';
import type { Database } from '../db/connect.js';
import type { DB, EventsTable } from '../db/schema.js';
import type { EventType } from './vocabulary.js';

/** An event to record: a name of the vocabulary and the columns that apply. */
export type NewEvent = Omit<Insertable<EventsTable>, 'type' | 'transaction_id' | 'event_id'> & { type: EventType };

/**
 * Who made a change, recorded in the event's `actor` column. An operator's change says how it
 * reached the admin API: its Unix socket, its TCP port with the admin token (and from where), or
 * the CLI running the admin API in its own process on the database (no server running). The
 * server's own maintenance (a signing key rotation by age) is `server`. A change made by a user on
 * our pages or by an app records no actor: the event's user_id and client_id say who.
 */
export type Actor = { kind: 'admin'; via: 'socket' | 'token' | 'cli'; address?: string } | { kind: 'server' };

/** The actor column's value: JSON, or null when nobody is named. */
export function actorColumn(actor: Actor | null | undefined): string | null {
  return actor ? JSON.stringify(actor) : null;
}

/**
 * The one writer of the event log. Call it with the transaction (or the single statement's
 * connection) that makes the change, never afterwards: an event exists if and only if its change
 * committed. Statements that make their change and write their event in one SQL statement
 * (the refresh rotation, repositories/refresh-tokens.ts; the device requests' transitions,
 * repositories/device-requests.ts) insert into `events` themselves, with a type from the
 * vocabulary.
 */
export async function recordEvents(db: Database | Transaction<DB>, events: readonly NewEvent[]): Promise<void> {
  if (events.length === 0) return;
  await db
    .insertInto('events')
    .values([...events])
    .execute();
}

/** A name of the vocabulary as an SQL literal, for a statement that writes its own event (a CTE inserting into `events`). */
export function eventTypeLiteral(type: EventType): RawBuilder<string> {
  return sql.lit(type);
}
