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
    .select([
      'client_id',
      'name',
      'kind',
      'type',
      'allowed_scopes',
      'introspection_allowed',
      'grant_types',
      'redirect_uris',
      'require_dpop',
      'confirmation_phrase',
      'created_at',
      'disabled_at',
    ])
    .orderBy('client_id')
    .limit(page.limit);
  if (page.after !== undefined) query = query.where('client_id', '>', page.after);
  return query.execute();
}

/** The changed client's row, or undefined when there is no such client. */
export async function updateClientFields(
  db: Database,
  clientId: string,
  fields: {
    name?: string;
    allowed_scopes?: string[];
    introspection_allowed?: boolean;
    grant_types?: string[];
    redirect_uris?: string[];
    require_dpop?: boolean;
    confirmation_phrase?: boolean;
  },
) {
  return db.updateTable('clients').set(fields).where('client_id', '=', clientId).returningAll().executeTakeFirst();
}

/**
 * Replaces a confidential client's secret in one statement. With a grace period, the replaced
 * hash is kept until `previousUntil`; without one (null), any earlier secret stops at once.
 * Undefined when no confidential client has that id.
 */
export async function replaceClientSecret(db: Database, clientId: string, secretHash: Uint8Array, previousUntil: Date | null) {
  return db
    .updateTable('clients')
    .set((eb) => ({
      secret_hash: secretHash,
      previous_secret_hash: previousUntil === null ? null : eb.ref('secret_hash'),
      previous_secret_expires_at: previousUntil,
    }))
    .where('client_id', '=', clientId)
    .where('type', '=', 'confidential')
    .returning(['client_id', 'previous_secret_expires_at'])
    .executeTakeFirst();
}

/** Deletes the client; its grants, tokens, events and pending requests go with it (cascades). */
export async function deleteClientRow(db: Database, clientId: string): Promise<boolean> {
  const result = await db.deleteFrom('clients').where('client_id', '=', clientId).executeTakeFirst();
  return result.numDeletedRows > 0n;
}
