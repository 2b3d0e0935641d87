import type { Insertable } from 'kysely';
import type { Database } from '../db/connect.js';
import type { ClientsTable } from '../db/schema.js';

export async function insertClient(db: Database, client: Insertable<ClientsTable>): Promise<void> {
  await db.insertInto('clients').values(client).execute();
}

export async function findClient(db: Database, clientId: string) {
  return db.selectFrom('clients').selectAll().where('client_id', '=', clientId).executeTakeFirst();
}

/** Returns whether a client was found. */
export async function setClientDisabledAt(db: Database, clientId: string, disabledAt: Date | null): Promise<boolean> {
  const result = await db.updateTable('clients').set({ disabled_at: disabledAt }).where('client_id', '=', clientId).executeTakeFirst();
  return result.numUpdatedRows > 0n;
}
