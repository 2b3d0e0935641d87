import { sql, type Insertable, type Transaction, type Updateable } from 'kysely';
import type { Database } from '../db/connect.js';
import type { DB, SsfStreamsTable } from '../db/schema.js';

type Db = Database | Transaction<DB>;

export type SsfStreamRow = Awaited<ReturnType<typeof findStreamOfApp>> & object;

/**
 * Adds a stream unless its app has `max` already. The app's row is locked (FOR NO KEY UPDATE, which
 * leaves its grants' foreign-key checks alone) so that two creations at once cannot both pass the
 * count. False when the app has no room, or is gone.
 */
export async function insertStreamIfRoom(trx: Transaction<DB>, stream: Insertable<SsfStreamsTable>, max: number): Promise<boolean> {
  const app = await trx.selectFrom('clients').select('client_id').where('client_id', '=', stream.client_id).forNoKeyUpdate().executeTakeFirst();
  if (!app) return false;
  const { count } = await trx
    .selectFrom('ssf_streams')
    .select((eb) => eb.fn.countAll<string>().as('count'))
    .where('client_id', '=', stream.client_id)
    .executeTakeFirstOrThrow();
  if (Number(count) >= max) return false;
  await trx.insertInto('ssf_streams').values(stream).execute();
  return true;
}

/** The app's stream: another app's is not found, as an unknown one is. */
export async function findStreamOfApp(db: Db, clientId: string, streamId: string) {
  return db.selectFrom('ssf_streams').selectAll().where('stream_id', '=', streamId).where('client_id', '=', clientId).executeTakeFirst();
}

export async function listStreamsOfApp(db: Db, clientId: string) {
  return db.selectFrom('ssf_streams').selectAll().where('client_id', '=', clientId).orderBy('created_at').orderBy('stream_id').execute();
}

/** The changed row, or undefined when the app has no such stream. */
export async function updateStreamOfApp(db: Db, clientId: string, streamId: string, fields: Updateable<SsfStreamsTable>) {
  return db.updateTable('ssf_streams').set(fields).where('stream_id', '=', streamId).where('client_id', '=', clientId).returningAll().executeTakeFirst();
}

export async function deleteStreamOfApp(db: Db, clientId: string, streamId: string): Promise<boolean> {
  const result = await db.deleteFrom('ssf_streams').where('stream_id', '=', streamId).where('client_id', '=', clientId).executeTakeFirst();
  return result.numDeletedRows > 0n;
}

/**
 * SSF 1.0 §8.1.4.2: records a verification request unless the last one was less than
 * `minIntervalSeconds` ago, in one statement, so concurrent requests get one verification.
 * Undefined when the app has no such stream or it is too soon (the caller asks which).
 */
export async function claimVerification(db: Db, clientId: string, streamId: string, now: Date, minIntervalSeconds: number) {
  return db
    .updateTable('ssf_streams')
    .set({ verification_requested_at: now })
    .where('stream_id', '=', streamId)
    .where('client_id', '=', clientId)
    .where((eb) =>
      eb.or([
        eb('verification_requested_at', 'is', null),
        eb('verification_requested_at', '<=', sql<Date>`${now}::timestamptz - make_interval(secs => ${minIntervalSeconds})`),
      ]),
    )
    .returningAll()
    .executeTakeFirst();
}

/** A stream as push delivery needs it, whoever's it is (the engine renders every target's messages). */
export async function findStreamForPush(db: Db, streamId: string) {
  return db
    .selectFrom('ssf_streams')
    .select(['stream_id', 'client_id', 'status', 'endpoint_url', 'authorization_header_sealed'])
    .where('stream_id', '=', streamId)
    .where('delivery_method', '=', 'urn:ietf:rfc:8935')
    .executeTakeFirst();
}

/** A user removed from a stream (SSF 1.0 §8.1.3.3): again is no change. */
export async function excludeSubject(db: Db, streamId: string, userId: string): Promise<boolean> {
  const inserted = await db
    .insertInto('ssf_excluded_subjects')
    .values({ stream_id: streamId, user_id: userId })
    .onConflict((oc) => oc.doNothing())
    .returning('user_id')
    .executeTakeFirst();
  return inserted !== undefined;
}

/** A removed user added back; a user never removed is no change. */
export async function includeSubject(db: Db, streamId: string, userId: string): Promise<boolean> {
  const result = await db.deleteFrom('ssf_excluded_subjects').where('stream_id', '=', streamId).where('user_id', '=', userId).executeTakeFirst();
  return result.numDeletedRows > 0n;
}

/**
 * Whether a receiver may hear of a user: the operator let its app hear of everyone, or the user
 * has, or had, a grant with the app (a live or ended grant, or a grant.issued event still kept).
 */
export async function mayHearOfUser(db: Db, clientId: string, userId: string): Promise<boolean> {
  const row = await sql<{ may: boolean }>`
    SELECT (SELECT ssf_all_users FROM clients WHERE client_id = ${clientId})
        OR EXISTS (SELECT 1 FROM grants WHERE user_id = ${userId}::uuid AND client_id = ${clientId})
        OR EXISTS (SELECT 1 FROM events WHERE user_id = ${userId}::uuid AND client_id = ${clientId} AND type = 'grant.issued') AS may`.execute(db);
  return row.rows[0]?.may === true;
}

/** Whether any stream may get SETs: none, and the fan-out has nothing to do. */
export async function hasLiveStreams(db: Db): Promise<boolean> {
  return (await db.selectFrom('ssf_streams').select('stream_id').where('status', '<>', 'disabled').limit(1).executeTakeFirst()) !== undefined;
}

/** The streams events are fanned out to: every one not disabled, with its app's switch. */
export async function listStreamsForFanOut(db: Db) {
  return db
    .selectFrom('ssf_streams as s')
    .innerJoin('clients as c', 'c.client_id', 's.client_id')
    .select(['s.stream_id', 's.client_id', 's.delivery_method', 's.events_requested', 's.subject_format', 's.status', 's.created_at', 'c.ssf_all_users'])
    .where('s.status', '<>', 'disabled')
    .execute();
}

/** Of these users and apps, the pairs where the user has or had a grant with the app (mayHearOfUser, in bulk). */
export async function listUsersOfApps(db: Db, userIds: readonly string[], clientIds: readonly string[]) {
  if (userIds.length === 0 || clientIds.length === 0) return [];
  const rows = await sql<{ user_id: string; client_id: string }>`
    SELECT user_id::text AS user_id, client_id FROM grants WHERE user_id = ANY(${userIds}::uuid[]) AND client_id = ANY(${clientIds}::text[])
    UNION
    SELECT user_id::text, client_id FROM events
    WHERE type = 'grant.issued' AND user_id = ANY(${userIds}::uuid[]) AND client_id = ANY(${clientIds}::text[])`.execute(db);
  return rows.rows;
}

export async function listExclusionsOfUsers(db: Db, userIds: readonly string[]) {
  if (userIds.length === 0) return [];
  return db
    .selectFrom('ssf_excluded_subjects')
    .select(['stream_id', sql<string>`user_id::text`.as('user_id')])
    .where(sql<boolean>`user_id = ANY(${userIds}::uuid[])`)
    .execute();
}

export async function listEmailsOfUsers(db: Db, userIds: readonly string[]) {
  if (userIds.length === 0) return [];
  return db
    .selectFrom('users')
    .select([sql<string>`user_id::text`.as('user_id'), 'email'])
    .where(sql<boolean>`user_id = ANY(${userIds}::uuid[])`)
    .execute();
}

/** Every stream's sealed Authorization header, to re-seal under a new key-encryption key. */
export async function listSealedStreamHeaders(trx: Transaction<DB>) {
  return trx
    .selectFrom('ssf_streams')
    .select(['stream_id', 'authorization_header_sealed'])
    .where('authorization_header_sealed', 'is not', null)
    .forUpdate()
    .execute() as Promise<Array<{ stream_id: string; authorization_header_sealed: Uint8Array }>>;
}

export async function setSealedStreamHeader(trx: Transaction<DB>, streamId: string, sealed: Uint8Array): Promise<void> {
  await trx.updateTable('ssf_streams').set({ authorization_header_sealed: sealed }).where('stream_id', '=', streamId).execute();
}
