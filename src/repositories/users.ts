import { sql, type Transaction } from 'kysely';
import type { DB } from '../db/schema.js';
import type { Database } from '../db/connect.js';

export async function insertUser(db: Database | Transaction<DB>, user: { email: string; password_hash: string; name: string | null }): Promise<string> {
  const row = await db.insertInto('users').values(user).returning('user_id').executeTakeFirstOrThrow();
  return row.user_id;
}

export async function findUserByEmail(db: Database, email: string) {
  return db.selectFrom('users').selectAll().where('email', '=', email).executeTakeFirst();
}

/**
 * Sets or clears the ban in one statement. Returns the user's id and whether they were banned
 * before (read under the row's lock, so of two bans at once only one finds them unbanned), or
 * undefined when no user has that email.
 */
export async function setUserBannedAt(
  db: Database | Transaction<DB>,
  email: string,
  bannedAt: Date | null,
): Promise<{ user_id: string; was_banned: boolean } | undefined> {
  const result = await sql<{ user_id: string; was_banned: boolean }>`
    UPDATE users u SET banned_at = ${bannedAt}::timestamptz
    FROM (SELECT user_id, banned_at FROM users WHERE email = ${email} FOR UPDATE) before
    WHERE u.user_id = before.user_id
    RETURNING u.user_id, before.banned_at IS NOT NULL AS was_banned`.execute(db);
  return result.rows[0];
}

/** The user's id, or undefined when no user has that email. */
export async function setUserName(trx: Transaction<DB>, email: string, name: string | null): Promise<string | undefined> {
  const row = await trx.updateTable('users').set({ name }).where('email', '=', email).returning('user_id').executeTakeFirst();
  return row?.user_id;
}

/** The user's id, or undefined when no user has that email. */
export async function setPasswordHash(trx: Transaction<DB>, email: string, passwordHash: string): Promise<string | undefined> {
  const row = await trx.updateTable('users').set({ password_hash: passwordHash }).where('email', '=', email).returning('user_id').executeTakeFirst();
  return row?.user_id;
}

/** The user's id, locked until the transaction ends, or undefined when no user has that email. */
export async function lockUserByEmail(trx: Transaction<DB>, email: string): Promise<string | undefined> {
  const row = await trx.selectFrom('users').select('user_id').where('email', '=', email).forUpdate().executeTakeFirst();
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

/** Returns how many sessions ended. */
export async function deleteSessionsOfUser(db: Database | Transaction<DB>, userId: string): Promise<number> {
  const result = await db.deleteFrom('browser_sessions').where('user_id', '=', userId).executeTakeFirst();
  return Number(result.numDeletedRows);
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

/** Deletes the user; sessions, grants, tokens and requests go with it (cascades). Events stay: they have no key to it. */
export async function deleteUserRow(db: Database | Transaction<DB>, userId: string): Promise<boolean> {
  const result = await db.deleteFrom('users').where('user_id', '=', userId).executeTakeFirst();
  return result.numDeletedRows > 0n;
}
