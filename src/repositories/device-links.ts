import { sql, type Insertable, type Transaction } from 'kysely';
import type { Database } from '../db/connect.js';
import type { AccessTokensTable, ClientKind, DB, DeviceLinksTable, NewLinkEvent, RefreshTokensTable } from '../db/schema.js';

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

/** The user's live links (not revoked, not expired) joined with their apps: the base of both account listings. */
function selectLiveLinksOfUser(db: Database, userId: string, now: Date) {
  return db
    .selectFrom('device_links as l')
    .innerJoin('clients as c', 'c.client_id', 'l.client_id')
    .where('l.user_id', '=', userId)
    .where('l.revoked_at', 'is', null)
    .where('l.expires_at', '>', now);
}

/** A user's live links of the given kinds of app, with the app: one query, most recently used first. */
export async function listLiveLinksOfUser(db: Database, userId: string, kinds: readonly ClientKind[], now: Date) {
  return selectLiveLinksOfUser(db, userId, now)
    .select([
      'l.link_id',
      'l.platform_name',
      'l.platform_description',
      'l.created_at',
      'l.last_used_at',
      'l.signed_in_ip',
      'l.last_used_ip',
      'c.client_id',
      'c.name as client_name',
      'c.kind as client_kind',
    ])
    .where('c.kind', 'in', kinds)
    .orderBy('l.last_used_at', 'desc')
    .orderBy('l.link_id')
    .execute();
}

/** The apps with at least one live link of the user, with how many and when one was last used: one query. */
export async function listAppsWithLiveLinks(db: Database, userId: string, now: Date) {
  return selectLiveLinksOfUser(db, userId, now)
    .select([
      'c.client_id',
      'c.name as client_name',
      'c.kind as client_kind',
      sql<number>`count(*)::int`.as('live_links'),
      sql<Date>`max(l.last_used_at)`.as('last_used_at'),
    ])
    .groupBy(['c.client_id', 'c.name', 'c.kind'])
    .orderBy('c.name')
    .orderBy('c.client_id')
    .execute();
}

/** One link of the user with its app's name; undefined when no link of theirs has this id. */
export async function findLinkOfUser(db: Database, userId: string, linkId: string) {
  return db
    .selectFrom('device_links as l')
    .innerJoin('clients as c', 'c.client_id', 'l.client_id')
    .select(['l.link_id', 'l.revoked_reason', 'c.name as client_name'])
    .where('l.link_id', '=', linkId)
    .where('l.user_id', '=', userId)
    .executeTakeFirst();
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
