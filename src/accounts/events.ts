import type { Database } from '../db/connect.js';
import { listLinkEventsOfUser } from '../repositories/link-events.js';
import { findUserByEmail } from '../repositories/users.js';

export interface LinkEventView {
  at: string;
  event: string;
  reason: string | null;
  link_id: string;
  client_id: string;
  app: string;
  client_ip: string | null;
}

/** What happened to each of a user's chains and why, for operators. Null when no such user. */
export async function eventsOfUser(db: Database, email: string, limit = 10_000): Promise<LinkEventView[] | null> {
  const user = await findUserByEmail(db, email);
  if (!user) return null;
  const rows = await listLinkEventsOfUser(db, user.user_id, limit);
  return rows.map((r) => ({
    at: r.created_at.toISOString(),
    event: r.event,
    reason: r.reason,
    link_id: r.link_id,
    client_id: r.client_id,
    app: r.client_name,
    client_ip: r.client_ip,
  }));
}
