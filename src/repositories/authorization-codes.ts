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
    .where(({ exists, selectFrom }) => exists(selectFrom('clients').select('client_id').where('client_id', '=', clientId).where('disabled_at', 'is', null)))
    .returning(['user_id', 'redirect_uri', 'scopes', 'code_challenge', 'nonce', 'auth_time', 'created_at', 'expires_at', 'dpop_jkt', 'signed_in_ip'])
    .executeTakeFirst();
}

/** The codes of this app with this PKCE challenge (one at most: the hash is the key). */
function selectCodeOfApp(db: Database | Transaction<DB>, codeHash: Uint8Array, clientId: string, codeChallenge: string) {
  return db.selectFrom('authorization_codes').where('code_hash', '=', codeHash).where('client_id', '=', clientId).where('code_challenge', '=', codeChallenge);
}

/** A code of this app and this PKCE challenge that was already redeemed, with the grant its redemption created (if any yet). */
export async function findRedeemedAuthorizationCode(trx: Transaction<DB>, codeHash: Uint8Array, clientId: string, codeChallenge: string) {
  return selectCodeOfApp(trx, codeHash, clientId, codeChallenge).select(['grant_id']).where('redeemed_at', 'is not', null).executeTakeFirst();
}

/**
 * A code of this app (while enabled) and this PKCE challenge, redeemed or not, with the key it is
 * bound to: read before a DPoP proof is recorded as used, so that a proof is spent only on a code
 * its sender holds.
 */
export async function findAuthorizationCodeOfApp(db: Database, codeHash: Uint8Array, clientId: string, codeChallenge: string) {
  return selectCodeOfApp(db, codeHash, clientId, codeChallenge)
    .select(['dpop_jkt'])
    .where(({ exists, selectFrom }) => exists(selectFrom('clients').select('client_id').where('client_id', '=', clientId).where('disabled_at', 'is', null)))
    .executeTakeFirst();
}

export async function setAuthorizationCodeGrant(trx: Transaction<DB>, codeHash: Uint8Array, grantId: string): Promise<void> {
  await trx.updateTable('authorization_codes').set({ grant_id: grantId }).where('code_hash', '=', codeHash).execute();
}
