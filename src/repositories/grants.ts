import { sql, type Insertable, type Transaction } from 'kysely';
import type { Database } from '../db/connect.js';
import type { AccessTokensTable, ClientKind, DB, GrantsTable, RefreshTokensTable } from '../db/schema.js';

export async function insertGrant(trx: Transaction<DB>, grant: Insertable<GrantsTable>): Promise<string> {
  const row = await trx.insertInto('grants').values(grant).returning('grant_id').executeTakeFirstOrThrow();
  return row.grant_id;
}

export async function insertRefreshToken(db: Database | Transaction<DB>, token: Insertable<RefreshTokensTable>): Promise<void> {
  await db.insertInto('refresh_tokens').values(token).execute();
}

export async function insertAccessToken(db: Database | Transaction<DB>, token: Insertable<AccessTokensTable>): Promise<void> {
  await db.insertInto('access_tokens').values(token).execute();
}

export interface RevokedGrant {
  grant_id: string;
  user_id: string;
  client_id: string;
}

/** One grant, a user's, an app's, or the grants of a list (one batch of a bulk revocation, bounded by its caller). */
export interface RevocationFilter {
  grantId?: string;
  userId?: string;
  clientId?: string;
  grantIds?: readonly string[];
}

/** Revokes the live grants matching the filter, in one statement; returns those this call revoked. */
export async function revokeLiveGrants(db: Database | Transaction<DB>, filter: RevocationFilter, reason: string, now: Date): Promise<RevokedGrant[]> {
  if (filter.grantId === undefined && filter.userId === undefined && filter.clientId === undefined && filter.grantIds === undefined) {
    throw new Error('revokeLiveGrants needs a filter');
  }
  if (filter.grantIds?.length === 0) return [];
  let query = db.updateTable('grants').set({ revoked_at: now, revoked_reason: reason }).where('revoked_at', 'is', null);
  if (filter.grantId !== undefined) query = query.where('grant_id', '=', filter.grantId);
  if (filter.userId !== undefined) query = query.where('user_id', '=', filter.userId);
  if (filter.clientId !== undefined) query = query.where('client_id', '=', filter.clientId);
  if (filter.grantIds !== undefined) query = query.where('grant_id', 'in', [...filter.grantIds]);
  return query.returning(['grant_id', 'user_id', 'client_id']).execute();
}

/** The user's live grants (not revoked, not expired) joined with their apps: the base of both account listings. */
function selectLiveGrantsOfUser(db: Database, userId: string, now: Date) {
  return db
    .selectFrom('grants as g')
    .innerJoin('clients as c', 'c.client_id', 'g.client_id')
    .where('g.user_id', '=', userId)
    .where('g.revoked_at', 'is', null)
    .where('g.expires_at', '>', now);
}

/** A user's live grants of the given kinds of app, with the app: one query, most recently used first. */
export async function listLiveGrantsOfUser(db: Database, userId: string, kinds: readonly ClientKind[], now: Date) {
  return selectLiveGrantsOfUser(db, userId, now)
    .select([
      'g.grant_id',
      'g.platform_name',
      'g.platform_description',
      'g.created_at',
      'g.last_used_at',
      'g.signed_in_ip',
      'g.last_used_ip',
      'g.redeemer_ip',
      'g.redeemer_action',
      'g.redeemer_signals',
      'c.client_id',
      'c.name as client_name',
      'c.kind as client_kind',
    ])
    .where('c.kind', 'in', kinds)
    .orderBy('g.last_used_at', 'desc')
    .orderBy('g.grant_id')
    .execute();
}

/** The apps with at least one live grant of the user, with how many and when one was last used: one query. */
export async function listAppsWithLiveGrants(db: Database, userId: string, now: Date) {
  return selectLiveGrantsOfUser(db, userId, now)
    .select([
      'c.client_id',
      'c.name as client_name',
      'c.kind as client_kind',
      sql<number>`count(*)::int`.as('live_grants'),
      sql<Date>`max(g.last_used_at)`.as('last_used_at'),
    ])
    .groupBy(['c.client_id', 'c.name', 'c.kind'])
    .orderBy('c.name')
    .orderBy('c.client_id')
    .execute();
}

/** One grant of the user with its app's name; undefined when no grant of theirs has this id. */
export async function findGrantOfUser(db: Database, userId: string, grantId: string) {
  return db
    .selectFrom('grants as g')
    .innerJoin('clients as c', 'c.client_id', 'g.client_id')
    .select(['g.grant_id', 'g.revoked_reason', 'c.name as client_name'])
    .where('g.grant_id', '=', grantId)
    .where('g.user_id', '=', userId)
    .executeTakeFirst();
}

/** The grant of an access or refresh token, whichever table holds the hash, with the DPoP key the token is bound to (a refresh token: its grant's). */
export async function findGrantOfToken(db: Database | Transaction<DB>, tokenHash: Uint8Array) {
  return db
    .selectFrom('access_tokens')
    .select(['grant_id', 'dpop_jkt'])
    .where('token_hash', '=', tokenHash)
    .unionAll(
      db
        .selectFrom('refresh_tokens')
        .innerJoin('grants', 'grants.grant_id', 'refresh_tokens.grant_id')
        .select(['refresh_tokens.grant_id', 'grants.dpop_jkt'])
        .where('refresh_tokens.token_hash', '=', tokenHash),
    )
    .executeTakeFirst();
}
