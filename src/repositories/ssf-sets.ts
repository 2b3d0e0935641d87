import { sql, type Insertable, type Transaction } from 'kysely';
import type { Database } from '../db/connect.js';
import type { DB, SsfSetsTable } from '../db/schema.js';

type Db = Database | Transaction<DB>;

export async function insertSets(db: Db, sets: ReadonlyArray<Insertable<SsfSetsTable>>): Promise<void> {
  if (sets.length === 0) return;
  await db
    .insertInto('ssf_sets')
    .values([...sets])
    .execute();
}

/** The stream's next SETs, oldest first, with whether more wait behind them. */
export async function listSetsOfStream(db: Db, streamId: string, limit: number) {
  const rows = await db
    .selectFrom('ssf_sets')
    .select(['jti', 'claims'])
    .where('stream_id', '=', streamId)
    .orderBy('position')
    .limit(limit + 1)
    .execute();
  return { sets: rows.slice(0, limit), more: rows.length > limit };
}

/** Whether the stream has a SET waiting. */
export async function hasSets(db: Db, streamId: string): Promise<boolean> {
  const row = await db.selectFrom('ssf_sets').select('jti').where('stream_id', '=', streamId).limit(1).executeTakeFirst();
  return row !== undefined;
}

/** The stream's SETs with these jtis, acknowledged (RFC 8936 §2.4): another stream's are left alone. */
export async function deleteSetsOfStream(db: Db, streamId: string, jtis: readonly string[]): Promise<number> {
  if (jtis.length === 0) return 0;
  const result = await db.deleteFrom('ssf_sets').where('stream_id', '=', streamId).where(sql<boolean>`jti = ANY(${jtis}::text[])`).executeTakeFirst();
  return Number(result.numDeletedRows);
}

/** SSF 1.0 §8.1.2: a disabled stream holds no events. */
export async function deleteAllSetsOfStream(db: Db, streamId: string): Promise<void> {
  await db.deleteFrom('ssf_sets').where('stream_id', '=', streamId).execute();
}
