import { sql, type Transaction } from 'kysely';
import type { Database } from '../db/connect.js';
import type { Insertable } from 'kysely';
import type { DB, WebhooksTable } from '../db/schema.js';

type Db = Database | Transaction<DB>;

export async function insertWebhook(db: Db, row: Insertable<WebhooksTable>): Promise<void> {
  await db.insertInto('webhooks').values(row).execute();
}

/** Endpoints with their delivery state (delivery_targets) and how many messages wait, in id order (keyset paging). */
export async function listWebhooks(db: Db, options: { afterId?: string | undefined; limit: number; webhookId?: string }) {
  let query = db
    .selectFrom('webhooks as w')
    .leftJoin('delivery_targets as t', (join) => join.on('t.target_kind', '=', 'webhook').onRef('t.target_id', '=', 'w.webhook_id'))
    .select([
      'w.webhook_id',
      'w.url',
      'w.event_types',
      'w.created_at',
      't.paused_at',
      't.pause_reason',
      't.failing_since',
      sql<number>`(SELECT count(*)::int FROM outbound_deliveries d
                   WHERE d.target_kind = 'webhook' AND d.target_id = w.webhook_id AND d.delivered_at IS NULL AND d.gave_up_at IS NULL)`.as('pending'),
    ])
    .orderBy('w.webhook_id')
    .limit(options.limit);
  if (options.afterId !== undefined) query = query.where('w.webhook_id', '>', options.afterId);
  if (options.webhookId !== undefined) query = query.where('w.webhook_id', '=', options.webhookId);
  return query.execute();
}

/** Every endpoint with the types it takes: the fan-out reads them at each page of events (a few rows). */
export async function listWebhookSubscriptions(db: Db) {
  return db.selectFrom('webhooks').select(['webhook_id', 'event_types']).execute();
}

/** Whether any endpoint is registered (paused ones included: their deliveries are queued held). */
export async function hasWebhooks(db: Db): Promise<boolean> {
  return (await db.selectFrom('webhooks').select('webhook_id').limit(1).executeTakeFirst()) !== undefined;
}

/** What a delivery needs to be sent: the endpoint's URL and sealed secret. */
export async function findWebhookForDelivery(db: Db, webhookId: string) {
  return db.selectFrom('webhooks').select(['url', 'sealed_secret']).where('webhook_id', '=', webhookId).executeTakeFirst();
}

export async function webhookExists(db: Db, webhookId: string, lock = false): Promise<boolean> {
  let query = db.selectFrom('webhooks').select('webhook_id').where('webhook_id', '=', webhookId);
  if (lock) query = query.forUpdate();
  return (await query.executeTakeFirst()) !== undefined;
}

export async function deleteWebhook(db: Db, webhookId: string): Promise<boolean> {
  const deleted = await db.deleteFrom('webhooks').where('webhook_id', '=', webhookId).returning('webhook_id').executeTakeFirst();
  return deleted !== undefined;
}

export async function listSealedWebhookSecrets(db: Db) {
  return db.selectFrom('webhooks').select(['webhook_id', 'sealed_secret']).forUpdate().execute();
}

export async function setSealedWebhookSecret(db: Db, webhookId: string, sealed: Uint8Array): Promise<void> {
  await db.updateTable('webhooks').set({ sealed_secret: sealed }).where('webhook_id', '=', webhookId).execute();
}

/** Events of the log from `since` on, oldest first, for a replay (at most `limit`). */
export async function listEventsSince(db: Db, since: Date, limit: number) {
  return db
    .selectFrom('events')
    .select([sql<string>`event_id::text`.as('event_id'), 'type', 'grant_id', 'user_id', 'created_at'])
    .where('created_at', '>=', since)
    .orderBy('event_id')
    .limit(limit)
    .execute();
}

/** A delivery's event, as its payload shows it. */
export async function findEventForDelivery(db: Db, eventId: string) {
  return db
    .selectFrom('events')
    .select(['type', 'grant_id', 'user_id', 'client_id', 'reason', 'client_ip', 'created_at', 'data', 'actor'])
    .where('event_id', '=', eventId)
    .executeTakeFirst();
}
