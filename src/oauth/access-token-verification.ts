import type { Deps } from '../deps.js';
import { findLiveAccessTokenWithUser } from '../repositories/access-tokens.js';
import { findLiveAppAccessToken } from '../repositories/app-access-tokens.js';
import { TOKEN_PREFIX, hashOpaque } from './opaque-tokens.js';

export interface LiveAccessToken {
  scopes: string[];
  issuedAt: Date;
  expiresAt: Date;
  grantId: string;
  userId: string;
  clientId: string;
  email: string;
  name: string | null;
  /** RFC 9449: the key it must be presented with (a DPoP proof), or null for a Bearer token. */
  dpopJkt: string | null;
}

/** Whether a value could be an access token we issued; anything else is refused without a lookup. */
export function isOurAccessToken(value: string): boolean {
  return value.startsWith(TOKEN_PREFIX.accessToken) && value.length <= 256;
}

/** The live access token with this value, or null: unknown, expired, revoked, banned or disabled look alike. */
export async function verifyAccessToken(deps: Pick<Deps, 'db' | 'clock'>, value: string): Promise<LiveAccessToken | null> {
  // Not a token we issue: spare the database.
  if (!isOurAccessToken(value)) return null;
  const row = await findLiveAccessTokenWithUser(deps.db, hashOpaque(value), deps.clock.now());
  if (!row) return null;
  return {
    scopes: row.scopes,
    issuedAt: row.created_at,
    expiresAt: row.expires_at,
    grantId: row.grant_id,
    userId: row.user_id,
    clientId: row.client_id,
    email: row.email,
    name: row.name,
    dpopJkt: row.dpop_jkt,
  };
}

/** An app's own live token (the client_credentials grant): whose, and for what. */
export interface LiveAppAccessToken {
  clientId: string;
  scopes: string[];
  expiresAt: Date;
  /** The DPoP key the token is bound to, or null for a Bearer token. */
  dpopJkt: string | null;
}

/** The app's own live token with this value, or null: unknown, expired, revoked or of a disabled app look alike. */
export async function verifyAppAccessToken(deps: Pick<Deps, 'db' | 'clock'>, value: string): Promise<LiveAppAccessToken | null> {
  if (!isOurAccessToken(value)) return null;
  const row = await findLiveAppAccessToken(deps.db, hashOpaque(value), deps.clock.now());
  return row ? { clientId: row.client_id, scopes: row.scopes, expiresAt: row.expires_at, dpopJkt: row.dpop_jkt } : null;
}
