import type { Database } from '../db/connect.js';

/** Inserts the candidate unless another instance got there first, then returns the stored value. */
export async function ensureServerSecret(db: Database, name: string, candidate: Uint8Array): Promise<Uint8Array> {
  await db.insertInto('server_secrets').values({ name, value: candidate }).onConflict((oc) => oc.column('name').doNothing()).execute();
  const row = await db.selectFrom('server_secrets').select('value').where('name', '=', name).executeTakeFirstOrThrow();
  return row.value;
}
