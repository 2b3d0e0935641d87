import type { Deps } from '../deps.js';
import { findGrantOfToken } from '../repositories/grants.js';
import { deleteAppAccessToken } from '../repositories/app-access-tokens.js';
import { revokeAndCountGrants } from './grant-revocation.js';
import type { Client } from './client-auth.js';
import { keyProven } from './grant-types/key-binding.js';
import { hashOpaque, TOKEN_PREFIX } from './opaque-tokens.js';

/** What a revocation knows of its request. */
export interface RevocationContext {
  /** The caller's address, recorded with the grant's event. */
  readonly ip: string;
  /** The key of the request's checked DPoP proof, or null without one. */
  readonly dpopJkt: string | null;
  /** Records the proof as used (refusing one already used with invalid_dpop_proof); nothing without a proof. */
  spendProof(): Promise<void>;
}

/**
 * RFC 7009 §2.1: revokes the grant of an access or refresh token, current or
 * replaced (or an app's own token of the client_credentials grant), so every token of that grant stops at once and the device leaves the user's
 * Devices page. token_type_hint is not needed: both tables are looked up by the hash.
 *
 * RFC 7009 §2.2: the answer is the same whatever the token was (unknown, malformed, expired,
 * already revoked, another app's), so nothing here may throw on account of the token. Another
 * app's token is left untouched: the grant must belong to the caller.
 */
export async function revokeToken(deps: Pick<Deps, 'db' | 'clock' | 'metrics'>, client: Client, token: string, context: RevocationContext): Promise<void> {
  const ours = token.startsWith(TOKEN_PREFIX.accessToken) || token.startsWith(TOKEN_PREFIX.refreshToken);
  if (!ours || token.length > 256) return;
  const hash = hashOpaque(token);
  const grant = await findGrantOfToken(deps.db, hash);
  // Not a user's token: perhaps the app's own (the client_credentials grant), which only it revokes.
  if (!grant) return deleteAppAccessToken(deps.db, hash, client.clientId);
  // A token bound to a DPoP key (RFC 9449), presented by a public client, which has no secret to
  // show: only the key's holder revokes with it, so a stolen bound token cannot end the user's
  // grant (issue 28 §4). Without a proof of that key it is left alone, with the same 200.
  if (grant.dpop_jkt !== null && client.type === 'public') {
    if (!keyProven(grant.dpop_jkt, context.dpopJkt)) return;
    await context.spendProof();
  }
  await revokeAndCountGrants(deps, { grantId: grant.grant_id, clientId: client.clientId }, 'revoked_by_app', context.ip);
}
