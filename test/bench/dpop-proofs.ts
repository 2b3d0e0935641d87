import { generateKeyPairSync, randomBytes, sign, type KeyObject } from 'node:crypto';
import { performance } from 'node:perf_hooks';

/**
 * DPoP proofs (RFC 9449 §4.2) for the dpop-* scenarios: one ES256 key per load generator, a proof
 * per request with its own jti. Signed before the run where possible (node:crypto signs one in
 * about 35 µs), so that the generator's core spends the measured window on requests; a proof is
 * good for DPOP_PROOF_WINDOW (60 s) after it is made, more than a full profile's warm-up and window.
 * Proofs that run out are signed on the spot and counted.
 */
export class ProofSupply {
  readonly #privateKey: KeyObject;
  readonly #header: string;
  readonly #ready: string[] = [];
  #next = 0;
  /** Proofs signed during the run because the prepared ones ran out. */
  signedLive = 0;

  constructor(
    private readonly htm: string,
    private readonly htu: string,
  ) {
    const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    this.#privateKey = privateKey;
    this.#header = Buffer.from(JSON.stringify({ typ: 'dpop+jwt', alg: 'ES256', jwk: publicKey.export({ format: 'jwk' }) })).toString('base64url');
  }

  /** Signs up to `count` proofs, for at most `budgetMs`. */
  prepare(count: number, budgetMs: number): void {
    const end = performance.now() + budgetMs;
    for (let i = 0; i < count && performance.now() < end; i++) this.#ready.push(this.#sign());
  }

  next(): string {
    const proof = this.#ready[this.#next];
    if (proof !== undefined) {
      this.#ready[this.#next++] = '';
      return proof;
    }
    this.signedLive++;
    return this.#sign();
  }

  #sign(): string {
    const payload = { htm: this.htm, htu: this.htu, iat: Math.floor(Date.now() / 1000), jti: randomBytes(16).toString('base64url') };
    const input = `${this.#header}.${Buffer.from(JSON.stringify(payload)).toString('base64url')}`;
    return `${input}.${sign('sha256', Buffer.from(input), { key: this.#privateKey, dsaEncoding: 'ieee-p1363' }).toString('base64url')}`;
  }
}
