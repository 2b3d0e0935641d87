import { sql, type Transaction } from 'kysely';
import type { Database } from '../db/connect.js';
import type { DB } from '../db/schema.js';

export interface StoredSigningKey {
  kid: string;
  alg: string;
  public_jwk: Record<string, unknown>;
  private_key_sealed: Uint8Array | null;
  created_at: Date;
  activates_at: Date | null;
  retired_at: Date | null;
  revoked_at: Date | null;
}

const columns = ['kid', 'alg', 'public_jwk', 'private_key_sealed', 'created_at', 'activates_at', 'retired_at', 'revoked_at'] as const;

/** Keys that may still be published at `now`: not revoked, and retired after `retiredAfter` if at all. */
export async function listLiveSigningKeys(db: Database, retiredAfter: Date): Promise<StoredSigningKey[]> {
  return db
    .selectFrom('signing_keys')
    .select(columns)
    .where('revoked_at', 'is', null)
    .where((eb) => eb.or([eb('retired_at', 'is', null), eb('retired_at', '>', retiredAfter)]))
    .orderBy('created_at')
    .execute();
}

export async function listAllSigningKeys(db: Database): Promise<StoredSigningKey[]> {
  return db.selectFrom('signing_keys').select(columns).orderBy('created_at').execute();
}

/**
 * Key maintenance runs in this transaction, one instance at a time: SHARE ROW EXCLUSIVE conflicts
 * with itself and with writes, not with the plain reads of a reload. The second of two instances
 * waits, then reads what the first committed and finds nothing left to do. PGlite has one
 * connection, which our dialect lends to one transaction at a time, so there the lock is trivially held.
 */
export async function lockSigningKeys(trx: Transaction<DB>): Promise<void> {
  await sql`LOCK TABLE signing_keys IN SHARE ROW EXCLUSIVE MODE`.execute(trx);
}

export async function listUnrevokedSigningKeysLocked(trx: Transaction<DB>): Promise<StoredSigningKey[]> {
  return trx.selectFrom('signing_keys').select(columns).where('revoked_at', 'is', null).orderBy('created_at').execute();
}

export async function insertSigningKey(
  trx: Transaction<DB>,
  key: { kid: string; alg: string; publicJwk: object; privateKeySealed: Uint8Array; createdAt: Date; activatesAt: Date | null },
): Promise<void> {
  await trx
    .insertInto('signing_keys')
    .values({
      kid: key.kid,
      alg: key.alg,
      public_jwk: JSON.stringify(key.publicJwk),
      private_key_sealed: key.privateKeySealed,
      created_at: key.createdAt,
      activates_at: key.activatesAt,
    })
    .execute();
}

export async function scheduleSigningKey(trx: Transaction<DB>, kid: string, activatesAt: Date): Promise<void> {
  await trx.updateTable('signing_keys').set({ activates_at: activatesAt }).where('kid', '=', kid).execute();
}

export async function retireSigningKey(trx: Transaction<DB>, kid: string, retiredAt: Date): Promise<void> {
  await trx.updateTable('signing_keys').set({ retired_at: retiredAt }).where('kid', '=', kid).execute();
}

/** Revoked keys lose their private half at once: nothing may ever sign with them again. */
export async function revokeSigningKey(trx: Transaction<DB>, kid: string, now: Date): Promise<boolean> {
  const result = await trx
    .updateTable('signing_keys')
    .set({ revoked_at: now, private_key_sealed: null, private_jwk: null })
    .where('kid', '=', kid)
    .where('revoked_at', 'is', null)
    .executeTakeFirst();
  return result.numUpdatedRows > 0n;
}

/** Keys no token can need any more: retired or revoked before `before`. */
export async function deleteSpentSigningKeys(trx: Transaction<DB>, before: Date): Promise<number> {
  const result = await trx
    .deleteFrom('signing_keys')
    .where((eb) => eb.or([eb('retired_at', '<=', before), eb('revoked_at', '<=', before)]))
    .executeTakeFirst();
  return Number(result.numDeletedRows);
}

/** Rows written before private keys were sealed (the clear column is emptied as each is sealed). */
export async function listClearSigningKeys(trx: Transaction<DB>): Promise<{ kid: string; private_jwk: Record<string, unknown> }[]> {
  const rows = await trx.selectFrom('signing_keys').select(['kid', 'private_jwk']).where('private_jwk', 'is not', null).execute();
  return rows.map((r) => ({ kid: r.kid, private_jwk: r.private_jwk! }));
}

export async function setSealedPrivateKey(trx: Transaction<DB>, kid: string, sealed: Uint8Array): Promise<void> {
  await trx.updateTable('signing_keys').set({ private_key_sealed: sealed, private_jwk: null }).where('kid', '=', kid).execute();
}

export async function listSealedPrivateKeys(trx: Transaction<DB>): Promise<{ kid: string; private_key_sealed: Uint8Array }[]> {
  const rows = await trx.selectFrom('signing_keys').select(['kid', 'private_key_sealed']).where('private_key_sealed', 'is not', null).execute();
  return rows.map((r) => ({ kid: r.kid, private_key_sealed: r.private_key_sealed! }));
}
