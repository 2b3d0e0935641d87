import type { Database } from '../db/connect.js';

/** A user's chain history, oldest first, with the app it belongs to. */
export async function listLinkEventsOfUser(db: Database, userId: string, limit: number) {
  return db
    .selectFrom('link_events as e')
    .innerJoin('clients as c', 'c.client_id', 'e.client_id')
    .select(['e.event_id', 'e.created_at', 'e.link_id', 'e.client_id', 'c.name as client_name', 'e.event', 'e.reason', 'e.client_ip'])
    .where('e.user_id', '=', userId)
    .orderBy('e.created_at', 'asc')
    .orderBy('e.event_id', 'asc')
    .limit(limit)
    .execute();
}
