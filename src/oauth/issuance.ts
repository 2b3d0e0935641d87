import type { Transaction } from 'kysely';
import type { DB } from '../db/schema.js';
import type { Deps } from '../deps.js';
import { addSeconds } from '../lib/clock.js';
import { insertAccessToken, insertRefreshToken } from '../repositories/device-links.js';
import type { ClientKind } from '../db/schema.js';
import { mintOpaque, TOKEN_PREFIX } from './tokens.js';

/** Refresh tokens go to TV / device apps and bots, the clients that stay signed in. */
export function receivesRefreshTokens(kind: ClientKind): boolean {
  return kind === 'tv' || kind === 'bot';
}

export interface IssuedOpaqueTokens {
  accessToken: string;
  refreshToken: string | null;
}

/** Mints an access token (and a refresh token when wanted) on a link; only hashes are stored. */
export async function issueOpaqueTokens(
  trx: Transaction<DB>,
  deps: Deps,
  linkId: string,
  scopes: string[],
  withRefreshToken: boolean,
  now: Date,
): Promise<IssuedOpaqueTokens> {
  const access = mintOpaque(TOKEN_PREFIX.accessToken);
  await insertAccessToken(trx, {
    token_hash: access.hash,
    link_id: linkId,
    scopes,
    created_at: now,
    expires_at: addSeconds(now, deps.config.accessTokenTtl),
  });
  if (!withRefreshToken) return { accessToken: access.value, refreshToken: null };
  const refresh = mintOpaque(TOKEN_PREFIX.refreshToken);
  await insertRefreshToken(trx, {
    token_hash: refresh.hash,
    link_id: linkId,
    created_at: now,
    expires_at: addSeconds(now, deps.config.refreshTokenTtl),
    replaced_at: null,
  });
  return { accessToken: access.value, refreshToken: refresh.value };
}
