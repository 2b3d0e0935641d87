import type { Database } from '../db/connect.js';
import { MAX_PAGE_SIZE } from '../lib/paging.js';
import { findClient } from '../repositories/clients.js';
import { listGrantEvents } from '../repositories/grant-events.js';
import { findUserByEmail } from '../repositories/users.js';
import { normaliseEmail } from './users.js';

export interface GrantEventView {
  /** Increasing: the next page starts after the last one shown. */
  event_id: string;
  at: string;
  event: string;
  reason: string | null;
  grant_id: string;
  user_id: string;
  client_id: string;
  app: string;
  client_ip: string | null;
}

export interface EventQuery {
  userEmail?: string | undefined;
  clientId?: string | undefined;
  since?: Date | undefined;
  after?: string | undefined;
  limit: number;
}

export type EventsResult = { kind: 'events'; events: GrantEventView[] } | { kind: 'unknown_user' } | { kind: 'unknown_client' };

/** What happened to grants and why, for operators: by user, by app, since a time, in order. */
export async function findEvents(db: Database, query: EventQuery): Promise<EventsResult> {
  let userId: string | undefined;
  if (query.userEmail !== undefined) {
    const user = await findUserByEmail(db, normaliseEmail(query.userEmail));
    if (!user) return { kind: 'unknown_user' };
    userId = user.user_id;
  }
  if (query.clientId !== undefined && !(await findClient(db, query.clientId))) return { kind: 'unknown_client' };
  const rows = await listGrantEvents(db, {
    userId,
    clientId: query.clientId,
    since: query.since,
    afterEventId: query.after,
    limit: Math.min(query.limit, MAX_PAGE_SIZE),
  });
  return {
    kind: 'events',
    events: rows.map((r) => ({
      event_id: String(r.event_id),
      at: r.created_at.toISOString(),
      event: r.event,
      reason: r.reason,
      grant_id: r.grant_id,
      user_id: r.user_id,
      client_id: r.client_id,
      app: r.client_name,
      client_ip: r.client_ip,
    })),
  };
}
