import type { Database } from '../db/connect.js';

export interface GrantEventFilter {
  userId?: string | undefined;
  clientId?: string | undefined;
  /** Only events at or after this time. */
  since?: Date | undefined;
  /** Keyset paging: only events after this one. */
  afterEventId?: string | undefined;
  limit: number;
}

/** Grant events in the order they happened, with the app they belong to. */
export async function listGrantEvents(db: Database, filter: GrantEventFilter) {
  let query = db
    .selectFrom('grant_events as e')
    .innerJoin('clients as c', 'c.client_id', 'e.client_id')
    .select(['e.event_id', 'e.created_at', 'e.grant_id', 'e.user_id', 'e.client_id', 'c.name as client_name', 'e.event', 'e.reason', 'e.client_ip'])
    .orderBy('e.event_id', 'asc')
    .limit(filter.limit);
  if (filter.userId !== undefined) query = query.where('e.user_id', '=', filter.userId);
  if (filter.clientId !== undefined) query = query.where('e.client_id', '=', filter.clientId);
  if (filter.since !== undefined) query = query.where('e.created_at', '>=', filter.since);
  if (filter.afterEventId !== undefined) query = query.where('e.event_id', '>', filter.afterEventId);
  return query.execute();
}
