import { sql, type Transaction } from 'kysely';
import type { Database } from '../db/connect.js';
import type { DB } from '../db/schema.js';

/** Inserts the sealed candidate unless another instance got there first, then returns the stored row. */
export async function ensureSealedServerSecret(
  db: Database,
  name: string,
  sealedCandidate: Uint8Array,
): Promise<{ value: Uint8Array | null; sealed_value: Uint8Array | null }> {
  await db
    .insertInto('server_secrets')
    .values({ name, sealed_value: sealedCandidate })
    .onConflict((oc) => oc.column('name').doNothing())
    .execute();
  return db.selectFrom('server_secrets').select(['value', 'sealed_value']).where('name', '=', name).executeTakeFirstOrThrow();
}

/** The sealing pass and the rewrap hold this so that two starters do not seal the same row twice. */
export async function lockServerSecrets(trx: Transaction<DB>): Promise<void> {
  await sql`LOCK TABLE server_secrets IN SHARE ROW EXCLUSIVE MODE`.execute(trx);
}

export async function listServerSecrets(trx: Transaction<DB>): Promise<{ name: string; value: Uint8Array | null; sealed_value: Uint8Array | null }[]> {
  return trx.selectFrom('server_secrets').select(['name', 'value', 'sealed_value']).execute();
}

export async function setSealedServerSecret(trx: Transaction<DB>, name: string, sealed: Uint8Array): Promise<void> {
  await trx.updateTable('server_secrets').set({ sealed_value: sealed, value: null }).where('name', '=', name).execute();
}
