import { sql, type Insertable, type Transaction } from 'kysely';
import type { Database } from '../db/connect.js';
import type { ClientsTable, DB } from '../db/schema.js';

export async function insertClient(db: Database | Transaction<DB>, client: Insertable<ClientsTable>): Promise<void> {
  await db.insertInto('clients').values(client).execute();
}

export async function findClient(db: Database, clientId: string) {
  return db.selectFrom('clients').selectAll().where('client_id', '=', clientId).executeTakeFirst();
}

/**
 * Sets or clears disabled_at in one statement. Returns whether the client was disabled before
 * (read under the row's lock), or undefined when there is no such client.
 */
export async function setClientDisabledAt(
  db: Database | Transaction<DB>,
  clientId: string,
  disabledAt: Date | null,
): Promise<{ was_disabled: boolean } | undefined> {
  const result = await sql<{ was_disabled: boolean }>`
    UPDATE clients c SET disabled_at = ${disabledAt}::timestamptz
    FROM (SELECT client_id, disabled_at FROM clients WHERE client_id = ${clientId} FOR UPDATE) before
    WHERE c.client_id = before.client_id
    RETURNING before.disabled_at IS NOT NULL AS was_disabled`.execute(db);
  return result.rows[0];
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
      'post_logout_redirect_uris',
      'require_dpop',
      'confirmation_phrase',
      'ssf_all_users',
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
  db: Database | Transaction<DB>,
  clientId: string,
  fields: {
    name?: string;
    allowed_scopes?: string[];
    introspection_allowed?: boolean;
    grant_types?: string[];
    redirect_uris?: string[];
    post_logout_redirect_uris?: string[];
    require_dpop?: boolean;
    confirmation_phrase?: boolean;
    ssf_all_users?: boolean;
  },
) {
  return db.updateTable('clients').set(fields).where('client_id', '=', clientId).returningAll().executeTakeFirst();
}

/**
 * Replaces a confidential client's secret in one statement. With a grace period, the replaced
 * hash is kept until `previousUntil`; without one (null), any earlier secret stops at once.
 * Undefined when no confidential client has that id.
 */
export async function replaceClientSecret(db: Database | Transaction<DB>, clientId: string, secretHash: Uint8Array, previousUntil: Date | null) {
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

/** Deletes the client; its grants, tokens and pending requests go with it (cascades). Events stay: they have no key to it. */
export async function deleteClientRow(db: Database | Transaction<DB>, clientId: string): Promise<boolean> {
  const result = await db.deleteFrom('clients').where('client_id', '=', clientId).executeTakeFirst();
  return result.numDeletedRows > 0n;
}
