import { calculateJwkThumbprint, exportJWK, generateKeyPair, importJWK, type CryptoKey, type JWK } from 'jose';
import type { Database } from '../db/connect.js';
import { ensureActiveSigningKey, listPublishedSigningKeys } from '../repositories/signing-keys.js';

export const ID_TOKEN_ALG = 'RS256';

export interface SigningKeys {
  /** The key new ID tokens are signed with. */
  active: { kid: string; privateKey: CryptoKey };
  /** Public keys for GET /.well-known/jwks.json: the active one and recently retired ones. */
  jwks: { keys: JWK[] };
}

/**
 * Keys live in the database so that every instance on it signs and verifies with the same ones.
 * A retired key stays published for as long as tokens it signed can live.
 */
export async function loadSigningKeys(db: Database, now: Date, idTokenTtlSeconds: number): Promise<SigningKeys> {
  await ensureActiveSigningKey(db, async () => {
    const { publicKey, privateKey } = await generateKeyPair(ID_TOKEN_ALG, { modulusLength: 2048, extractable: true });
    const publicJwk = await exportJWK(publicKey);
    const privateJwk = await exportJWK(privateKey);
    // kid is the RFC 7638 thumbprint, so it names the key itself.
    const kid = await calculateJwkThumbprint(publicJwk, 'sha256');
    return { kid, alg: ID_TOKEN_ALG, publicJwk, privateJwk };
  });
  const stored = await listPublishedSigningKeys(db, new Date(now.getTime() - idTokenTtlSeconds * 1000));
  const activeRow = stored.find((k) => k.retired_at === null);
  if (!activeRow) throw new Error('no active signing key');
  const privateKey = (await importJWK(activeRow.private_jwk as JWK, activeRow.alg)) as CryptoKey;
  return {
    active: { kid: activeRow.kid, privateKey },
    jwks: {
      keys: stored.map((k) => ({ ...(k.public_jwk as JWK), kid: k.kid, alg: k.alg, use: 'sig' })),
    },
  };
}
