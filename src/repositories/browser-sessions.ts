import type { Insertable, Transaction } from 'kysely';
import type { Database } from '../db/connect.js';
import type { BrowserSessionsTable, DB } from '../db/schema.js';

export async function insertBrowserSession(db: Database | Transaction<DB>, session: Insertable<BrowserSessionsTable>): Promise<void> {
  await db.insertInto('browser_sessions').values(session).execute();
}

/** The live session with that hash, with whether its user (if any) is banned. */
export async function findLiveBrowserSession(db: Database, sessionHash: Uint8Array, now: Date) {
  return db
    .selectFrom('browser_sessions as s')
    .leftJoin('users as u', 'u.user_id', 's.user_id')
    .select(['s.session_hash', 's.user_id', 's.csrf_secret', 's.auth_time', 'u.banned_at', 'u.email'])
    .where('s.session_hash', '=', sessionHash)
    .where('s.expires_at', '>', now)
    .executeTakeFirst();
}

/** The deleted session's user (null for a session of nobody), or undefined when there was no such row. */
export async function deleteBrowserSession(db: Database | Transaction<DB>, sessionHash: Uint8Array): Promise<string | null | undefined> {
  const row = await db.deleteFrom('browser_sessions').where('session_hash', '=', sessionHash).returning('user_id').executeTakeFirst();
  return row?.user_id;
}
