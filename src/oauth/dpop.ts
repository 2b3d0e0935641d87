import { createHash, createHmac } from 'node:crypto';
import { calculateJwkThumbprint, compactVerify, decodeProtectedHeader, importJWK, type JWK } from 'jose';
import type { Deps } from '../deps.js';
import type { CheckedHeader } from './dpop-headers.js';
import { OAuthError } from './errors.js';

/**
 * DPoP (RFC 9449): a client proves, with every token request and every use of a bound token,
 * that it holds the private key its tokens are bound to. This module checks a proof completely and
 * names its key by thumbprint (RFC 7638, the "jkt"); which key a request, code, grant or token is
 * bound to, and what binding means, is for the grant types and the resource endpoints.
 */

/**
 * Asymmetric algorithms only (RFC 9449 §4.2: never none, never a MAC). EdDSA and its fully
 * specified name Ed25519 (the Ed25519 curve only).
 */
export const DPOP_SIGNING_ALGS = ['ES256', 'ES384', 'EdDSA', 'Ed25519', 'PS256', 'RS256'] as const;
const ALGS: ReadonlySet<string> = new Set(DPOP_SIGNING_ALGS);

/**
 * The key type and curve each alg may use. A proof's cost is its key's: an RSA public exponent
 * of 3,072 bits made one verification cost 13 ordinary proofs (issue 28), so RSA keys must use
 * e = 65537 and a modulus of 2,048 to 4,096 bits, and curves are the alg's own.
 */
const KEY_SHAPES: Readonly<Record<string, { kty: string; crv?: string }>> = {
  ES256: { kty: 'EC', crv: 'P-256' },
  ES384: { kty: 'EC', crv: 'P-384' },
  EdDSA: { kty: 'OKP', crv: 'Ed25519' },
  Ed25519: { kty: 'OKP', crv: 'Ed25519' },
  PS256: { kty: 'RSA' },
  RS256: { kty: 'RSA' },
};
/** RSA: the standard public exponent only, base64url of 65537. */
const RSA_EXPONENT = 'AQAB';
const RSA_MODULUS_BITS = { min: 2048, max: 4096 } as const;

/** A 4096-bit RSA key with its proof is about 1.5 KB; nothing legitimate comes near this. */
const MAX_PROOF_LENGTH = 4096;
/** RFC 9449 §4.2 asks for at least 96 random bits; clients send 22 to 43 characters. */
const MAX_JTI_LENGTH = 256;
/** A base64url SHA-256 thumbprint (RFC 7638): what dpop_jkt must look like. */
export const JKT_SYNTAX = /^[A-Za-z0-9_-]{43}$/;

/** An empty signature gets as far as the alg check, so that alg none is refused by name. */
const COMPACT_JWS = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/;
/** RFC 7517/7518: members that only a private (or symmetric) key has. */
const PRIVATE_MEMBERS = ['d', 'p', 'q', 'dp', 'dq', 'qi', 'oth', 'k'] as const;

/** Where the proof came: the token endpoint answers 400, a resource 401 with a DPoP challenge (RFC 9449 §7.1). */
export type ProofPlace = 'token_endpoint' | 'resource';

export interface ProofRequest {
  /** The DPoP header as the server received it: several are refused. */
  header: string | string[] | undefined;
  method: string;
  /** The endpoint's URL as this server names it (from ISSUER), which htu must name too. */
  url: string;
  /** At a resource: the access token presented with the proof, whose hash it must carry (ath). */
  accessToken?: string;
}

export interface VerifiedProof {
  /** The proof key's RFC 7638 thumbprint: what tokens are bound to. */
  jkt: string;
}

/** What checking and spending a proof reads of the dependencies. */
export type ProofDeps = Pick<Deps, 'config' | 'clock' | 'secrets' | 'usedProofs' | 'proofHeaders'>;

/** The algs a WWW-Authenticate: DPoP challenge lists (RFC 9449 §7.1). */
const DPOP_CHALLENGE_ALGS = `algs="${DPOP_SIGNING_ALGS.join(' ')}"`;

/** A 401 challenge for the DPoP scheme at a resource; `error` and description are ours, never the request's. */
export function dpopChallenge(error: string | null, description?: string): string {
  const parts = ['DPoP realm="device-auth"'];
  if (error) parts.push(`error="${error}"`);
  if (description) parts.push(`error_description="${description.replace(/["\\]/g, '')}"`);
  parts.push(DPOP_CHALLENGE_ALGS);
  return parts.join(', ');
}

function refused(place: ProofPlace, description: string): OAuthError {
  // RFC 9449 §5: 400 invalid_dpop_proof at the token endpoint; §7.1: 401 with a challenge at a resource.
  if (place === 'token_endpoint') return new OAuthError('invalid_dpop_proof', description);
  return new OAuthError('invalid_dpop_proof', description, 401, { 'WWW-Authenticate': dpopChallenge('invalid_dpop_proof', description) });
}

function nonceRequired(deps: ProofDeps, place: ProofPlace, description: string): OAuthError {
  const nonce = currentDpopNonce(deps);
  // RFC 9449 §8 (token endpoint, 400) and §9 (resource, 401 with the challenge).
  if (place === 'token_endpoint') return new OAuthError('use_dpop_nonce', description, 400, { 'DPoP-Nonce': nonce });
  return new OAuthError('use_dpop_nonce', description, 401, {
    'WWW-Authenticate': dpopChallenge('use_dpop_nonce', description),
    'DPoP-Nonce': nonce,
  });
}

const slotOf = (deps: ProofDeps, at: Date) => Math.floor(at.getTime() / 1000 / deps.config.dpop.noncePeriodSeconds);
const nonceOfSlot = (key: Buffer, slot: number) => createHmac('sha256', key).update(`dpop-nonce:${slot}`).digest('base64url');

/**
 * RFC 9449 §8: a server nonce with no state: the HMAC of the current time slot under a key every
 * instance shares, so any instance accepts any other's, for one to two periods.
 */
function currentDpopNonce(deps: ProofDeps): string {
  return nonceOfSlot(deps.secrets.dpopNonceKey, slotOf(deps, deps.clock.now()));
}

function isLiveNonce(deps: ProofDeps, nonce: unknown): boolean {
  if (typeof nonce !== 'string' || nonce.length !== 43) return false;
  const slot = slotOf(deps, deps.clock.now());
  return nonce === nonceOfSlot(deps.secrets.dpopNonceKey, slot) || nonce === nonceOfSlot(deps.secrets.dpopNonceKey, slot - 1);
}

/** The modulus's length in bits from its base64url text, without decoding more than its first byte. */
function modulusBits(n: string): number {
  const bytes = Math.floor((n.length * 3) / 4);
  const first = Buffer.from(n.slice(0, 4), 'base64url')[0] ?? 0;
  return first === 0 ? (bytes - 1) * 8 : bytes * 8 - Math.clz32(first) + 24;
}

/** Why a jwk's shape does not fit its alg (kty, curve, RSA exponent and modulus size), or null: before any import. */
function keyShapeProblem(jwk: JWK, alg: string): string | null {
  const shape = KEY_SHAPES[alg];
  if (!shape || jwk.kty !== shape.kty) return `the DPoP proof jwk must be of kty ${shape?.kty ?? '?'} for ${alg}`;
  if (shape.crv !== undefined && jwk.crv !== shape.crv) return `the DPoP proof jwk must be on curve ${shape.crv} for ${alg}`;
  if (shape.kty !== 'RSA') return null;
  if (jwk.e !== RSA_EXPONENT) return 'the DPoP proof RSA key must use the public exponent 65537';
  const bits = typeof jwk.n === 'string' && /^[A-Za-z0-9_-]+$/.test(jwk.n) ? modulusBits(jwk.n) : 0;
  if (bits < RSA_MODULUS_BITS.min || bits > RSA_MODULUS_BITS.max) {
    return `the DPoP proof RSA key must have a modulus of ${RSA_MODULUS_BITS.min} to ${RSA_MODULUS_BITS.max} bits`;
  }
  return null;
}

/** RFC 9449 §4.3 steps 3-6: typ, an allowed alg, a public jwk of a bounded shape; the key imported and named. */
async function checkHeader(deps: ProofDeps, proof: string, place: ProofPlace): Promise<CheckedHeader> {
  const text = proof.slice(0, proof.indexOf('.'));
  const known = deps.proofHeaders.get(text);
  if (known) return known;
  let protectedHeader: ReturnType<typeof decodeProtectedHeader>;
  try {
    protectedHeader = decodeProtectedHeader(proof);
  } catch {
    throw refused(place, 'the DPoP proof header is not valid JSON');
  }
  if (protectedHeader.typ !== 'dpop+jwt') throw refused(place, 'the DPoP proof must have typ dpop+jwt');
  const alg = protectedHeader.alg;
  if (typeof alg !== 'string' || !ALGS.has(alg)) throw refused(place, `the DPoP proof must be signed with one of ${DPOP_SIGNING_ALGS.join(', ')}`);
  const jwk = protectedHeader.jwk as JWK | undefined;
  if (typeof jwk !== 'object' || jwk === null || Array.isArray(jwk)) throw refused(place, 'the DPoP proof must carry its public key as jwk');
  if (PRIVATE_MEMBERS.some((member) => member in jwk)) throw refused(place, 'the DPoP proof jwk must be a public key, without private parts');
  const problem = keyShapeProblem(jwk, alg);
  if (problem) throw refused(place, problem);
  let checked: CheckedHeader;
  try {
    checked = { alg, key: await importJWK(jwk, alg), jkt: await calculateJwkThumbprint(jwk, 'sha256') };
  } catch {
    throw refused(place, 'the DPoP proof jwk is not a usable key for its alg');
  }
  deps.proofHeaders.remember(text, checked);
  return checked;
}

/** RFC 9449 §4.3 step 9: htu without query and fragment, compared after the URL parser's normalisation. */
function targetOf(url: string): string | null {
  if (url.length > 2048) return null;
  try {
    const parsed = new URL(url);
    return `${parsed.protocol}//${parsed.host}${parsed.pathname}`;
  } catch {
    return null;
  }
}

/** base64url(SHA-256(token)): the ath claim (RFC 9449 §4.2). */
function accessTokenHash(token: string): string {
  return createHash('sha256').update(token, 'ascii').digest('base64url');
}

/** A proof that passed every check, not yet recorded as used: `spendDpopProof` records it. */
export interface CheckedProof extends VerifiedProof {
  readonly proofHash: Buffer;
  readonly expiresAt: Date;
}

/** The payload of a compact JWS, read before its signature is checked: only for cheap refusals. */
function unverifiedPayload(proof: string, place: ProofPlace): Record<string, unknown> {
  try {
    const bytes = Buffer.from(proof.slice(proof.indexOf('.') + 1, proof.lastIndexOf('.')), 'base64url');
    const parsed: unknown = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes));
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new Error('not an object');
    return parsed as Record<string, unknown>;
  } catch {
    throw refused(place, 'the DPoP proof payload is not a JSON object');
  }
}

/** A proof whose claims passed the cheap checks, its signature not yet verified: `verifyReadProof` does that. */
export interface ReadProof {
  readonly text: string;
  readonly jti: string;
  readonly now: Date;
}

/**
 * RFC 9449 §4.3, the cheap half: one header, its size and shape, then the claims (jti shape, htm,
 * htu, iat, ath, nonce), read before the header's key is imported and before the signature is
 * verified, so a proof that would be refused anyway costs no public-key operation. The claims
 * checked are the signed ones, since the signature, checked next, covers those same bytes. Null
 * when the request carried no DPoP header. Descriptions are ours; nothing of the proof is echoed
 * into a header or a log.
 */
export function readDpopProof(deps: ProofDeps, request: ProofRequest, place: ProofPlace): ReadProof | null {
  const { header } = request;
  if (header === undefined) return null;
  // Node joins repeated headers with ", ": either way, one proof only (RFC 9449 §4.3 step 1).
  if (Array.isArray(header) || header.includes(',')) throw refused(place, 'send exactly one DPoP header');
  if (header.length > MAX_PROOF_LENGTH) throw refused(place, `the DPoP proof is longer than ${MAX_PROOF_LENGTH} characters`);
  if (!COMPACT_JWS.test(header)) throw refused(place, 'the DPoP header is not a compact JWS');

  const payload = unverifiedPayload(header, place);
  const { jti, htm, htu, iat } = payload;
  if (typeof jti !== 'string' || jti.length === 0 || jti.length > MAX_JTI_LENGTH) {
    throw refused(place, `the DPoP proof needs a jti of 1 to ${MAX_JTI_LENGTH} characters`);
  }
  if (htm !== request.method) throw refused(place, 'the DPoP proof htm does not match the request method');
  const expected = targetOf(request.url);
  if (typeof htu !== 'string' || expected === null || targetOf(htu) !== expected) throw refused(place, 'the DPoP proof htu does not match this endpoint');
  const now = deps.clock.now();
  const window = deps.config.dpop.proofWindowSeconds;
  if (typeof iat !== 'number' || !Number.isFinite(iat) || Math.abs(now.getTime() / 1000 - iat) > window) {
    throw refused(place, `the DPoP proof iat must be within ${window} seconds of the server's time`);
  }
  if (request.accessToken !== undefined && payload.ath !== accessTokenHash(request.accessToken)) {
    throw refused(place, 'the DPoP proof ath does not match the access token');
  }
  if (deps.config.dpop.nonces && !isLiveNonce(deps, payload.nonce)) {
    throw nonceRequired(deps, place, payload.nonce === undefined ? 'this server requires a DPoP nonce' : 'the DPoP nonce is stale or unknown');
  }
  return { text: header, jti, now };
}

/**
 * RFC 9449 §4.3, the costly half: typ, alg and a public jwk of a bounded shape, the key imported
 * (or found among the checked headers) and the signature verified. Nothing is written: the jti is
 * recorded by `spendDpopProof` once the proof was used for something that needed it.
 */
export async function verifyReadProof(deps: ProofDeps, proof: ReadProof, place: ProofPlace): Promise<CheckedProof> {
  const { alg, key, jkt } = await checkHeader(deps, proof.text, place);
  try {
    await compactVerify(proof.text, key, { algorithms: [alg] });
  } catch {
    throw refused(place, 'the DPoP proof signature does not verify with its jwk');
  }
  // RFC 9449 §11.1: a jti is used once per key. Kept until no clock within the window could accept
  // the proof again (iat at most `window` ahead of now, accepted until `window` after iat).
  return {
    jkt,
    proofHash: createHash('sha256').update(`${jkt}.${proof.jti}`).digest(),
    expiresAt: new Date(proof.now.getTime() + 2 * deps.config.dpop.proofWindowSeconds * 1000),
  };
}

/** Both halves: every check of a proof, cheapest first, nothing written (RFC 9449 §4.3). */
export async function checkDpopProof(deps: ProofDeps, request: ProofRequest, place: ProofPlace): Promise<CheckedProof | null> {
  const read = readDpopProof(deps, request, place);
  return read && verifyReadProof(deps, read, place);
}

/** Records a checked proof as used, once across every instance; a second use is refused. The request's one write for its proof. */
export async function spendDpopProof(deps: ProofDeps, proof: CheckedProof, place: ProofPlace): Promise<VerifiedProof> {
  const firstUse = await deps.usedProofs.claimOnce(proof.proofHash, proof.expiresAt);
  if (!firstUse) throw refused(place, 'this DPoP proof was already used; sign a new one with a new jti');
  return { jkt: proof.jkt };
}

/** The spending of no proof: a request without a DPoP header. */
export const NOTHING_TO_SPEND = async (): Promise<void> => {};

/**
 * The spending of a checked proof, deferred until the request found what needed it (issue 28 §2):
 * at the token endpoint, the grant's device request, refresh token or code. It records the proof
 * at most once however often it is called, and does nothing for a request without a proof.
 */
export function deferredSpend(deps: ProofDeps, proof: CheckedProof | null, place: ProofPlace): () => Promise<void> {
  if (!proof) return NOTHING_TO_SPEND;
  let spent: Promise<unknown> | undefined;
  return async () => {
    spent ??= spendDpopProof(deps, proof, place);
    await spent;
  };
}

/** RFC 9449 §8.2: with nonces on, every answer carries the current one, so a client never needs a refusal to learn it. */
export function dpopNonceHeader(deps: ProofDeps): Record<string, string> {
  return deps.config.dpop.nonces ? { 'DPoP-Nonce': currentDpopNonce(deps) } : {};
}

/** A refusal because a key was required (a bound request, code or grant, or an app that requires DPoP) and not proven. */
export function keyNotProven(place: ProofPlace, description: string): OAuthError {
  return refused(place, description);
}
