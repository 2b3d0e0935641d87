import type { Insertable, Transaction } from 'kysely';
import type { Database } from '../db/connect.js';
import type { AccessTokensTable, DB, DeviceLinksTable, NewLinkEvent, RefreshTokensTable } from '../db/schema.js';

export async function insertDeviceLink(trx: Transaction<DB>, link: Insertable<DeviceLinksTable>): Promise<string> {
  const row = await trx.insertInto('device_links').values(link).returning('link_id').executeTakeFirstOrThrow();
  return row.link_id;
}

export async function insertRefreshToken(db: Database | Transaction<DB>, token: Insertable<RefreshTokensTable>): Promise<void> {
  await db.insertInto('refresh_tokens').values(token).execute();
}

export async function insertAccessToken(db: Database | Transaction<DB>, token: Insertable<AccessTokensTable>): Promise<void> {
  await db.insertInto('access_tokens').values(token).execute();
}

export async function insertLinkEvent(db: Database | Transaction<DB>, event: NewLinkEvent): Promise<void> {
  await db.insertInto('link_events').values(event).execute();
}

export interface RevokedLink {
  link_id: string;
  user_id: string;
  client_id: string;
}

/** Revokes the live links matching the filter, in one statement; returns those this call revoked. */
export async function revokeLiveLinks(
  db: Database | Transaction<DB>,
  filter: { linkId?: string; userId?: string; clientId?: string },
  reason: string,
  now: Date,
): Promise<RevokedLink[]> {
  if (filter.linkId === undefined && filter.userId === undefined && filter.clientId === undefined) {
    throw new Error('revokeLiveLinks needs a filter');
  }
  let query = db
    .updateTable('device_links')
    .set({ revoked_at: now, revoked_reason: reason })
    .where('revoked_at', 'is', null);
  if (filter.linkId !== undefined) query = query.where('link_id', '=', filter.linkId);
  if (filter.userId !== undefined) query = query.where('user_id', '=', filter.userId);
  if (filter.clientId !== undefined) query = query.where('client_id', '=', filter.clientId);
  return query.returning(['link_id', 'user_id', 'client_id']).execute();
}

export async function insertLinkEvents(db: Database | Transaction<DB>, events: NewLinkEvent[]): Promise<void> {
  if (events.length === 0) return;
  await db.insertInto('link_events').values(events).execute();
}

/** The link of an access or refresh token, whichever table holds the hash. */
export async function findLinkOfToken(db: Database | Transaction<DB>, tokenHash: Uint8Array) {
  return db
    .selectFrom('access_tokens')
    .select('link_id')
    .where('token_hash', '=', tokenHash)
    .unionAll(db.selectFrom('refresh_tokens').select('link_id').where('token_hash', '=', tokenHash))
    .executeTakeFirst();
}
