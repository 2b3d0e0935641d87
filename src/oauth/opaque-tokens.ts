import { hmacSha256, randomToken, sha256 } from '../lib/random.js';

/**
 * Short type prefixes make a leaked token greppable and tell its kind at a glance.
 * Clients must treat tokens as opaque: the prefixes may change.
 */
export const TOKEN_PREFIX = {
  accessToken: 'da_at_',
  refreshToken: 'da_rt_',
  deviceCode: 'da_dc_',
  authorizationCode: 'da_ac_',
  session: 'da_ss_',
  /** The nonce in an anonymous visitor's cookie: never stored, only the key of its CSRF token. */
  anonymousVisit: 'da_an_',
} as const;

export interface MintedSecret {
  /** Goes to its holder once, never stored. */
  value: string;
  /** SHA-256 of value: the only form that reaches the database. */
  hash: Buffer;
}

/** 256 random bits behind a type prefix. */
export function mintOpaque(prefix: string): MintedSecret {
  const value = `${prefix}${randomToken(32)}`;
  return { value, hash: sha256(value) };
}

/**
 * 256 bits computed from `source` under a server key, behind a type prefix: only the holder of
 * `source` can ask for it again, and without the key it looks as random as mintOpaque's. `label`
 * keeps the values derived for different purposes from one source apart.
 */
export function deriveOpaque(prefix: string, key: Buffer, label: string, source: string): MintedSecret {
  const value = `${prefix}${hmacSha256(key, `${label}\0${source}`).toString('base64url')}`;
  return { value, hash: sha256(value) };
}

export function hashOpaque(value: string): Buffer {
  return sha256(value);
}
