import type { Transaction } from 'kysely';
import type { DB } from '../db/schema.js';
import type { Deps } from '../deps.js';
import { addSeconds } from '../lib/clock.js';
import { insertAccessToken, insertRefreshToken } from '../repositories/grants.js';
import type { Client } from './client-auth.js';
import { REFRESH_TOKEN_GRANT } from './metadata.js';
import { mintOpaque, TOKEN_PREFIX, type MintedSecret } from './tokens.js';

/** Refresh tokens go to the apps registered for the refresh_token grant (RFC 7591 §2). */
export function receivesRefreshTokens(client: Pick<Client, 'grantTypes'>): boolean {
  return client.grantTypes.includes(REFRESH_TOKEN_GRANT);
}

export interface OpaqueTokens {
  access: MintedSecret;
  refresh: MintedSecret | null;
}

/** An access token, and a refresh token when wanted; minted before the grant that names the latter. */
export function mintOpaqueTokens(withRefreshToken: boolean): OpaqueTokens {
  return {
    access: mintOpaque(TOKEN_PREFIX.accessToken),
    refresh: withRefreshToken ? mintOpaque(TOKEN_PREFIX.refreshToken) : null,
  };
}

/** A new grant: its id, and the user and app it joins. */
export interface NewGrant {
  grantId: string;
  userId: string;
  clientId: string;
  scopes: string[];
}

/** Stores the tokens' hashes on their grant (whose current_refresh_hash already names the refresh token). */
export async function storeOpaqueTokens(
  trx: Transaction<DB>,
  deps: Deps,
  { grantId, userId, clientId, scopes }: NewGrant,
  { access, refresh }: OpaqueTokens,
  now: Date,
): Promise<void> {
  await insertAccessToken(trx, {
    token_hash: access.hash,
    grant_id: grantId,
    user_id: userId,
    client_id: clientId,
    scopes,
    created_at: now,
    expires_at: addSeconds(now, deps.config.accessTokenTtl),
  });
  if (!refresh) return;
  await insertRefreshToken(trx, {
    token_hash: refresh.hash,
    grant_id: grantId,
    created_at: now,
    expires_at: addSeconds(now, deps.config.refreshTokenTtl),
  });
}
