import { sql } from 'kysely';
import type { Database } from '../db/connect.js';

export interface StoredSigningKey {
  kid: string;
  alg: string;
  public_jwk: Record<string, unknown>;
  private_jwk: Record<string, unknown>;
  created_at: Date;
  retired_at: Date | null;
}

export async function listPublishedSigningKeys(db: Database, retiredAfter: Date): Promise<StoredSigningKey[]> {
  return db
    .selectFrom('signing_keys')
    .selectAll()
    .where((eb) => eb.or([eb('retired_at', 'is', null), eb('retired_at', '>', retiredAfter)]))
    .orderBy('created_at', 'desc')
    .execute();
}

/**
 * Stores `candidate` as the active key unless an active key exists. The table lock makes two
 * instances starting at once agree on one key.
 */
export async function ensureActiveSigningKey(
  db: Database,
  candidate: () => Promise<{ kid: string; alg: string; publicJwk: object; privateJwk: object }>,
): Promise<void> {
  await db.transaction().execute(async (trx) => {
    await sql`LOCK TABLE signing_keys IN SHARE ROW EXCLUSIVE MODE`.execute(trx);
    const active = await trx.selectFrom('signing_keys').select('kid').where('retired_at', 'is', null).executeTakeFirst();
    if (active) return;
    const key = await candidate();
    await trx
      .insertInto('signing_keys')
      .values({ kid: key.kid, alg: key.alg, public_jwk: JSON.stringify(key.publicJwk), private_jwk: JSON.stringify(key.privateJwk) })
      .execute();
  });
}
