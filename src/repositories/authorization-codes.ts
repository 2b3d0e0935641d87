import type { Insertable, Transaction } from 'kysely';
import type { Database } from '../db/connect.js';
import type { AuthorizationCodesTable, DB } from '../db/schema.js';

export async function insertAuthorizationCode(db: Database, code: Insertable<AuthorizationCodesTable>): Promise<void> {
  await db.insertInto('authorization_codes').values(code).execute();
}

/**
 * Redeems a code of this app in one statement: the first caller gets the row, every later one
 * (or a concurrent one, once the first commits) gets undefined. Another app's code, a code whose
 * PKCE challenge is not the one given, and any code of a disabled app, is left alone: the app's
 * state and the challenge are checked in the same statement, not by a round trip of their own.
 */
export async function redeemAuthorizationCode(trx: Transaction<DB>, codeHash: Uint8Array, clientId: string, codeChallenge: string, now: Date) {
  return trx
    .updateTable('authorization_codes')
    .set({ redeemed_at: now })
    .where('code_hash', '=', codeHash)
    .where('client_id', '=', clientId)
    .where('code_challenge', '=', codeChallenge)
    .where('redeemed_at', 'is', null)
    .where(({ exists, selectFrom }) =>
      exists(selectFrom('clients').select('client_id').where('client_id', '=', clientId).where('disabled_at', 'is', null)),
    )
    .returning(['user_id', 'redirect_uri', 'scopes', 'code_challenge', 'nonce', 'auth_time', 'expires_at', 'dpop_jkt'])
    .executeTakeFirst();
}

/** A code of this app and this PKCE challenge that was already redeemed, with the grant its redemption created (if any yet). */
export async function findRedeemedAuthorizationCode(trx: Transaction<DB>, codeHash: Uint8Array, clientId: string, codeChallenge: string) {
  return trx
    .selectFrom('authorization_codes')
    .select(['grant_id'])
    .where('code_hash', '=', codeHash)
    .where('client_id', '=', clientId)
    .where('code_challenge', '=', codeChallenge)
    .where('redeemed_at', 'is not', null)
    .executeTakeFirst();
}

export async function setAuthorizationCodeGrant(trx: Transaction<DB>, codeHash: Uint8Array, grantId: string): Promise<void> {
  await trx.updateTable('authorization_codes').set({ grant_id: grantId }).where('code_hash', '=', codeHash).execute();
}
