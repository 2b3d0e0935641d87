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

/** A page of clients in client_id order, after `after` (keyset paging: stable while clients are added). */
export async function listClients(db: Database, page: { after?: string | undefined; limit: number }) {
  let query = db
    .selectFrom('clients')
    .select(['client_id', 'name', 'kind', 'type', 'allowed_scopes', 'introspection_allowed', 'created_at', 'disabled_at'])
    .orderBy('client_id')
    .limit(page.limit);
  if (page.after !== undefined) query = query.where('client_id', '>', page.after);
  return query.execute();
}
