import { createHash, createHmac, randomBytes } from 'node:crypto';
import { calculateJwkThumbprint, exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK } from 'jose';
import { expect } from 'vitest';
import { epochSeconds } from '../../src/lib/clock.js';
import type { TestApp } from './app.js';
import { decide, poll, startDeviceFlow } from './device.js';
import type { TokenSet } from './tokens.js';

/** A client's DPoP key pair (RFC 9449 §4), with its public JWK and thumbprint. */
export interface DpopKey {
  alg: string;
  privateKey: CryptoKey;
  jwk: JWK;
  jkt: string;
}

export async function dpopKey(alg = 'ES256'): Promise<DpopKey> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  const jwk = await exportJWK(publicKey);
  return { alg, privateKey, jwk, jkt: await calculateJwkThumbprint(jwk, 'sha256') };
}

const ISSUER = 'http://localhost:3000';

export interface ProofOptions {
  htm?: string;
  /** A path on the test issuer, or an absolute URL. */
  htu?: string;
  /** Seconds since the epoch; now by default. */
  iat?: number;
  jti?: string | null;
  /** The access token to hash into ath. */
  accessToken?: string;
  ath?: string;
  nonce?: string;
  typ?: string;
  /** Replaces the jwk in the header (a private key, say). */
  jwk?: JWK;
}

/** A proof signed by `key`, correct unless an option says otherwise. */
export async function proofFor(key: DpopKey, options: ProofOptions = {}): Promise<string> {
  const htu = options.htu ?? '/oauth/token';
  const payload: Record<string, unknown> = {
    htm: options.htm ?? 'POST',
    htu: htu.startsWith('/') ? `${ISSUER}${htu}` : htu,
    iat: options.iat ?? Math.floor(Date.now() / 1000),
  };
  if (options.jti !== null) payload.jti = options.jti ?? randomBytes(16).toString('base64url');
  if (options.accessToken !== undefined) payload.ath = createHash('sha256').update(options.accessToken).digest('base64url');
  if (options.ath !== undefined) payload.ath = options.ath;
  if (options.nonce !== undefined) payload.nonce = options.nonce;
  return new SignJWT(payload).setProtectedHeader({ alg: key.alg, typ: options.typ ?? 'dpop+jwt', jwk: options.jwk ?? key.jwk }).sign(key.privateKey);
}

const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');

/** A proof with alg none or a MAC (HS256 under a key anyone could pick): never accepted. */
export function unsignedProof(alg: 'none' | 'HS256', jwk: JWK, htu = '/oauth/token'): string {
  const header = b64({ alg, typ: 'dpop+jwt', jwk });
  const payload = b64({ htm: 'POST', htu: `${ISSUER}${htu}`, iat: Math.floor(Date.now() / 1000), jti: randomBytes(16).toString('base64url') });
  const signature = alg === 'none' ? '' : createHmac('sha256', 'secret').update(`${header}.${payload}`).digest('base64url');
  return `${header}.${payload}.${signature}`;
}

/** A device flow of a public app bound to `key` at its start, approved by `userId` and redeemed with proofs of `key` (dated by the app's clock). */
export async function boundDeviceTokens(t: TestApp, clientId: string, userId: string, key: DpopKey, scope = 'openid offline_access'): Promise<TokenSet> {
  const iat = () => epochSeconds(t.clock.now());
  const flow = await startDeviceFlow(t, clientId, { scope }, { dpop: await proofFor(key, { iat: iat(), htu: '/oauth/device/code' }) });
  await decide(t, flow.user_code, userId, 'approve');
  t.clock.advance(flow.interval);
  const res = await poll(t, clientId, flow.device_code, { dpop: await proofFor(key, { iat: iat() }) });
  expect(res.statusCode, res.body).toBe(200);
  return res.json();
}
