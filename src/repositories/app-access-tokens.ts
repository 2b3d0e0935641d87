import { sql } from 'kysely';
import type { Database } from '../db/connect.js';

/**
 * Stores an app's own token (the client_credentials grant) in one statement that also checks the
 * app is enabled: the token endpoint identified the app from its cache, which does not say.
 * False when the app is disabled or gone, and nothing was stored.
 */
export async function insertAppAccessToken(
  db: Database,
  token: { tokenHash: Uint8Array; clientId: string; scopes: string[]; createdAt: Date; expiresAt: Date; dpopJkt: string | null },
): Promise<boolean> {
  const result = await sql`
    INSERT INTO app_access_tokens (token_hash, client_id, scopes, created_at, expires_at, dpop_jkt)
    SELECT ${token.tokenHash}, client_id, ${token.scopes}::text[], ${token.createdAt}, ${token.expiresAt}, ${token.dpopJkt}::text
    FROM clients WHERE client_id = ${token.clientId} AND disabled_at IS NULL`.execute(db);
  return Number(result.numAffectedRows ?? 0n) === 1;
}

/** The live token with this hash: stored, unexpired, its app enabled. */
export async function findLiveAppAccessToken(db: Database, tokenHash: Uint8Array, now: Date) {
  return db
    .selectFrom('app_access_tokens as t')
    .innerJoin('clients as c', 'c.client_id', 't.client_id')
    .select(['t.client_id', 't.scopes', 't.created_at', 't.expires_at', 't.dpop_jkt'])
    .where('t.token_hash', '=', tokenHash)
    .where('t.expires_at', '>', now)
    .where('c.disabled_at', 'is', null)
    .executeTakeFirst();
}

/** RFC 7009: the app's own token, revoked by the app; another app's is left alone. */
export async function deleteAppAccessToken(db: Database, tokenHash: Uint8Array, clientId: string): Promise<void> {
  await db.deleteFrom('app_access_tokens').where('token_hash', '=', tokenHash).where('client_id', '=', clientId).execute();
}
