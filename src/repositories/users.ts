import type { Transaction } from 'kysely';
import type { DB } from '../db/schema.js';
import type { Database } from '../db/connect.js';

export async function insertUser(db: Database, user: { email: string; password_hash: string; name: string | null }): Promise<string> {
  const row = await db.insertInto('users').values(user).returning('user_id').executeTakeFirstOrThrow();
  return row.user_id;
}

export async function findUserByEmail(db: Database, email: string) {
  return db.selectFrom('users').selectAll().where('email', '=', email).executeTakeFirst();
}

export async function findUserById(db: Database, userId: string) {
  return db.selectFrom('users').selectAll().where('user_id', '=', userId).executeTakeFirst();
}

/** Returns the user's id, or undefined when no user has that email. */
export async function setUserBannedAt(db: Database | Transaction<DB>, email: string, bannedAt: Date | null): Promise<string | undefined> {
  const row = await db.updateTable('users').set({ banned_at: bannedAt }).where('email', '=', email).returning('user_id').executeTakeFirst();
  return row?.user_id;
}

/**
 * The user a grant is about to be issued to, read under a share lock held to the end of the
 * issuing transaction. A ban updates this row first (bans.ts), so the two are ordered: a ban
 * that came first is seen here (the read waits for it and returns the banned row), and a ban
 * that comes later waits for the issuance to commit, then revokes the new grant with the rest.
 * That keeps "a banned user has no access token" true without a users join on every token check.
 */
export async function lockUserForIssuance(trx: Transaction<DB>, userId: string) {
  return trx.selectFrom('users').select(['email', 'name', 'banned_at']).where('user_id', '=', userId).forShare().executeTakeFirst();
}

export async function deleteSessionsOfUser(db: Database | Transaction<DB>, userId: string): Promise<void> {
  await db.deleteFrom('browser_sessions').where('user_id', '=', userId).execute();
}

/**
 * A page of users in email order, after `after`; `search` keeps those whose email or name holds
 * it (case-insensitive, LIKE's wildcards taken literally).
 */
export async function listUsers(db: Database, page: { search?: string | undefined; after?: string | undefined; limit: number }) {
  let query = db.selectFrom('users').select(['user_id', 'email', 'name', 'created_at', 'banned_at']).orderBy('email').limit(page.limit);
  if (page.after !== undefined) query = query.where('email', '>', page.after);
  if (page.search) {
    const pattern = `%${page.search.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
    query = query.where((eb) => eb.or([eb('email', 'ilike', pattern), eb('name', 'ilike', pattern)]));
  }
  return query.execute();
}

/** Deletes the user; sessions, grants, tokens, events and requests go with it (cascades). */
export async function deleteUserRow(db: Database, userId: string): Promise<boolean> {
  const result = await db.deleteFrom('users').where('user_id', '=', userId).executeTakeFirst();
  return result.numDeletedRows > 0n;
}
