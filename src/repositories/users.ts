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
