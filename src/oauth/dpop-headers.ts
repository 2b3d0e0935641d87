import type { CryptoKey } from 'jose';

/** A protected header that passed every check, with its imported key and the key's thumbprint. */
export interface CheckedHeader {
  alg: string;
  key: CryptoKey | Uint8Array;
  jkt: string;
}

/**
 * Checked headers by their exact base64url text, one per process (in Deps). A device signs every
 * proof with one key, so its proofs share one header; importing the key and hashing its
 * thumbprint were two thirds of a proof's cost in jose (about 230 of 350 µs). Only public keys
 * that passed every check are kept, and a different byte is a different entry; bounded, oldest
 * first out.
 */
export class CheckedProofHeaders {
  readonly #headers = new Map<string, CheckedHeader>();

  constructor(private readonly capacity = 10_000) {}

  get(text: string): CheckedHeader | undefined {
    return this.#headers.get(text);
  }

  remember(text: string, checked: CheckedHeader): void {
    if (this.#headers.size >= this.capacity) this.#headers.delete(this.#headers.keys().next().value as string);
    this.#headers.set(text, checked);
  }
}
