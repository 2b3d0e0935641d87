import { generateKeyPair, exportJWK } from 'jose';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ClearRowInSealedDatabaseError } from '../../src/keys/key-encryption.js';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { createTestDatabase, type TestDatabase } from '../helpers/database.js';

/**
 * Issue 28 §4: every start sealed whatever clear private key or server secret it found, so
 * someone with write access to the database but not the key-encryption key could plant a known
 * signing key. Once a database is sealed, a clear row is refused with a clear error.
 */

let database: TestDatabase;

beforeAll(async () => {
  database = await createTestDatabase();
  // The first start seals: from now on the database is sealed.
  const first = await startTestApp({ database });
  await first.close();
});
afterAll(() => database.drop());

const db = () => database.handle.db;

describe('a sealed database stays sealed', () => {
  it('a planted clear signing key is refused at start, naming its row, and stays unsealed', async () => {
    const { privateKey } = await generateKeyPair('RS256', { extractable: true });
    const planted = await exportJWK(privateKey);
    const { kid } = await db().selectFrom('signing_keys').select('kid').orderBy('activates_at', 'desc').executeTakeFirstOrThrow();
    await sql`UPDATE signing_keys SET private_jwk = ${JSON.stringify(planted)}::jsonb, private_key_sealed = NULL WHERE kid = ${kid}`.execute(db());
    try {
      const refused = startTestApp({ database });
      await expect(refused).rejects.toThrow(ClearRowInSealedDatabaseError);
      await expect(refused).rejects.toThrow(new RegExp(`signing_keys:${kid}.*in the clear: refused, not sealed`));
      const row = await db().selectFrom('signing_keys').select(['private_jwk', 'private_key_sealed']).where('kid', '=', kid).executeTakeFirstOrThrow();
      expect(row.private_key_sealed).toBeNull();
      expect(row.private_jwk).not.toBeNull();
    } finally {
      await db().deleteFrom('signing_keys').where('kid', '=', kid).execute();
    }
  });

  it('a planted clear server secret is refused at start, naming its row; deleted, the server starts and makes it anew, sealed', async () => {
    await sql`UPDATE server_secrets SET value = ${Buffer.alloc(32, 1)}, sealed_value = NULL WHERE name = 'user_code_hmac_key'`.execute(db());
    await expect(startTestApp({ database })).rejects.toThrow(/server_secrets:user_code_hmac_key holds a value in the clear: refused, not sealed/);
    const row = await db().selectFrom('server_secrets').select(['value', 'sealed_value']).where('name', '=', 'user_code_hmac_key').executeTakeFirstOrThrow();
    expect(row.sealed_value).toBeNull();
    await db().deleteFrom('server_secrets').where('name', '=', 'user_code_hmac_key').execute();
    let t: TestApp | null = null;
    try {
      t = await startTestApp({ database });
      expect(t.deps.secrets.userCodeKey.equals(Buffer.alloc(32, 1))).toBe(false);
      const again = await db()
        .selectFrom('server_secrets')
        .select(['value', 'sealed_value'])
        .where('name', '=', 'user_code_hmac_key')
        .executeTakeFirstOrThrow();
      expect(again.value).toBeNull();
      expect(again.sealed_value).not.toBeNull();
    } finally {
      await t?.close();
    }
  });
});
