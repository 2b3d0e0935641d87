import type { Deps } from '../deps.js';
import { findGrantOfToken } from '../repositories/grants.js';
import { revokeAndCountGrants } from './grant-revocation.js';
import type { Client } from './client-auth.js';
import { spendDpopProof, type CheckedProof } from './dpop.js';
import { hashOpaque, TOKEN_PREFIX } from './tokens.js';

/**
 * RFC 7009 §2.1: revokes the grant of an access or refresh token, current or
 * replaced, so every token of that grant stops at once and the device leaves the user's
 * Devices page. token_type_hint is not needed: both tables are looked up by the hash.
 *
 * RFC 7009 §2.2: the answer is the same whatever the token was (unknown, malformed, expired,
 * already revoked, another app's), so nothing here may throw on account of the token. Another
 * app's token is left untouched: the grant must belong to the caller.
 */
export async function revokeToken(deps: Deps, client: Client, token: string, context: { ip: string; proof: CheckedProof | null }): Promise<void> {
  const ours = token.startsWith(TOKEN_PREFIX.accessToken) || token.startsWith(TOKEN_PREFIX.refreshToken);
  if (!ours || token.length > 256) return;
  const grant = await findGrantOfToken(deps.db, hashOpaque(token));
  if (!grant) return;
  // A token bound to a DPoP key (RFC 9449), presented by a public client, which has no secret to
  // show: only the key's holder revokes with it, so a stolen bound token cannot end the user's
  // grant (issue 28 §4). Without a proof of that key it is left alone, with the same 200.
  if (grant.dpop_jkt !== null && client.type === 'public') {
    if (context.proof?.jkt !== grant.dpop_jkt) return;
    await spendDpopProof(deps, context.proof, 'token_endpoint');
  }
  await revokeAndCountGrants(deps, { grantId: grant.grant_id, clientId: client.clientId }, 'revoked_by_app', context.ip);
}
