import { setTimeout as sleep } from 'node:timers/promises';
import type { Database } from '../db/connect.js';
import { MAX_PAGE_SIZE } from '../lib/paging.js';
import { listEvents, tailEvents, type EventFilter, type EventRow, type TailPosition } from '../repositories/events.js';
import { findUserByEmail } from '../repositories/users.js';
import { normaliseEmail } from './users.js';

/** An event as operators see it (the admin API, the CLI): never an email, never a secret. */
export interface EventView {
  /** Increasing: the next page starts after the last one shown. */
  event_id: string;
  /** A name of the vocabulary (events/vocabulary.ts). */
  type: string;
  at: string;
  reason: string | null;
  grant_id: string | null;
  user_id: string | null;
  client_id: string | null;
  /** The app's name while it exists; null for an event of no app, or of a deleted one. */
  app: string | null;
  client_ip: string | null;
  data: unknown;
  /** Who made the change and how (events/event-log.ts, Actor); null when user_id and client_id say. */
  actor: unknown;
}

export interface EventQuery {
  types?: readonly string[] | undefined;
  /** An email (a user who exists) or a user id (whether the user still exists or not). */
  user?: string | undefined;
  clientId?: string | undefined;
  grantId?: string | undefined;
  since?: Date | undefined;
  until?: Date | undefined;
}

type Resolved = { kind: 'filter'; filter: EventFilter } | { kind: 'unknown_user' };

const USER_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * A user is named by email while the account exists; after it was deleted only its id names it
 * (its events keep the id, never the email). An app or grant id filters whether it exists or not.
 */
async function resolve(db: Database, query: EventQuery): Promise<Resolved> {
  let userId: string | undefined;
  if (query.user !== undefined) {
    if (USER_ID.test(query.user)) userId = query.user.toLowerCase();
    else {
      const user = await findUserByEmail(db, normaliseEmail(query.user));
      if (!user) return { kind: 'unknown_user' };
      userId = user.user_id;
    }
  }
  return {
    kind: 'filter',
    filter: { types: query.types, userId, clientId: query.clientId, grantId: query.grantId, since: query.since, until: query.until },
  };
}

function toView(row: EventRow): EventView {
  return {
    event_id: row.event_id,
    type: row.type,
    at: new Date(row.created_at).toISOString(),
    reason: row.reason,
    grant_id: row.grant_id,
    user_id: row.user_id,
    client_id: row.client_id,
    app: row.client_name,
    client_ip: row.client_ip,
    data: row.data,
    actor: row.actor,
  };
}

export type EventsResult = { kind: 'events'; events: EventView[] } | { kind: 'unknown_user' };

/** The event log for operators: by type, user, app, grant and time, in order, a page at a time. */
export async function findEvents(db: Database, query: EventQuery, page: { after?: string | undefined; limit: number }): Promise<EventsResult> {
  const resolved = await resolve(db, query);
  if (resolved.kind !== 'filter') return resolved;
  const rows = await listEvents(db, resolved.filter, { afterEventId: page.after, limit: Math.min(page.limit, MAX_PAGE_SIZE) });
  return { kind: 'events', events: rows.map(toView) };
}

/** How often a waiting tail looks for new events. */
const TAIL_LOOK_MS = 500;

export type TailResult = { kind: 'events'; events: EventView[]; position: TailPosition } | { kind: 'unknown_user' };

/**
 * The events committed after `position` (from the present when null) that match the query, in
 * committed order: at once when there are some, else as soon as some commit, looking every half
 * second for at most `waitSeconds` (a long poll: `device-auth events --follow` asks again with the
 * position it got). `signal` ends the wait early (the caller went away, the server is closing).
 */
export async function tailEventLog(
  db: Database,
  query: EventQuery,
  options: { position: TailPosition | null; limit: number; waitSeconds: number; signal: AbortSignal },
): Promise<TailResult> {
  const resolved = await resolve(db, query);
  if (resolved.kind !== 'filter') return resolved;
  const deadline = Date.now() + options.waitSeconds * 1000;
  let position = options.position;
  const limit = Math.min(options.limit, MAX_PAGE_SIZE);
  // Bounded by the deadline, and by a count besides: a clock that jumps cannot keep it going.
  for (let look = 0; look <= (options.waitSeconds * 1000) / TAIL_LOOK_MS + 1; look++) {
    const read = await tailEvents(db, resolved.filter, position, limit);
    position = read.position;
    if (read.events.length > 0 || Date.now() >= deadline || options.signal.aborted) {
      return { kind: 'events', events: read.events.map(toView), position };
    }
    await sleep(Math.min(TAIL_LOOK_MS, Math.max(0, deadline - Date.now())), undefined, { signal: options.signal }).catch(() => {});
  }
  return { kind: 'events', events: [], position: position! };
}
