import { sql, type Transaction } from 'kysely';
import type { Database } from '../db/connect.js';
import type { DB } from '../db/schema.js';

export async function findConsent(db: Database, userId: string, clientId: string) {
  return db.selectFrom('consents').select(['scopes', 'granted_at']).where('user_id', '=', userId).where('client_id', '=', clientId).executeTakeFirst();
}

/** Adds scopes to what the user agreed to share with the app, in one statement (concurrent consents merge). */
export async function rememberConsent(db: Database, userId: string, clientId: string, scopes: readonly string[], now: Date): Promise<void> {
  await db
    .insertInto('consents')
    .values({ user_id: userId, client_id: clientId, scopes: [...scopes], granted_at: now })
    .onConflict((conflict) =>
      conflict.columns(['user_id', 'client_id']).doUpdateSet({
        scopes: sql<string[]>`ARRAY(SELECT DISTINCT unnest(consents.scopes || excluded.scopes) ORDER BY 1)`,
        granted_at: now,
      }),
    )
    .execute();
}

export async function forgetConsent(db: Database | Transaction<DB>, userId: string, clientId: string): Promise<boolean> {
  const result = await db.deleteFrom('consents').where('user_id', '=', userId).where('client_id', '=', clientId).executeTakeFirst();
  return result.numDeletedRows > 0n;
}

/** The apps the user has agreed to share something with. */
export async function listConsentsOfUser(db: Database, userId: string) {
  return db
    .selectFrom('consents as s')
    .innerJoin('clients as c', 'c.client_id', 's.client_id')
    .select(['c.client_id', 'c.name as client_name', 'c.kind as client_kind', 's.scopes', 's.granted_at'])
    .where('s.user_id', '=', userId)
    .execute();
}
