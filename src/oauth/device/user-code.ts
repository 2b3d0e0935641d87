import { randomInt } from 'node:crypto';
import { hmacSha256 } from '../../lib/random.js';

/**
 * RFC 8628 §6.1: 20 consonants, no vowels (no words can form) and nothing that reads like a
 * digit. 8 characters give 20^8 ≈ 2.6 × 10^10 codes, about 34.6 bits.
 */
export const USER_CODE_ALPHABET = 'BCDFGHJKLMNPQRSTVWXZ';
export const USER_CODE_LENGTH = 8;

export function generateUserCode(): string {
  let code = '';
  for (let i = 0; i < USER_CODE_LENGTH; i++) code += USER_CODE_ALPHABET[randomInt(USER_CODE_ALPHABET.length)];
  return formatUserCode(code);
}

/** XXXXXXXX -> XXXX-XXXX */
function formatUserCode(bare: string): string {
  return `${bare.slice(0, 4)}-${bare.slice(4)}`;
}

const typedCode = new RegExp(`^[${USER_CODE_ALPHABET}]{${USER_CODE_LENGTH}}$`);

/**
 * What the user typed, normalised: case-insensitive, hyphen and spaces optional. Null when it
 * cannot be a code at all.
 */
export function normaliseUserCode(typed: string): string | null {
  const bare = typed.toUpperCase().replace(/[\s-]/g, '');
  return typedCode.test(bare) ? formatUserCode(bare) : null;
}

/** User codes are short, so they are stored as an HMAC under a server secret, not a bare hash. */
export function userCodeHmac(key: Buffer, code: string): Buffer {
  return hmacSha256(key, code);
}

/**
 * The handle that names a request in the approval form. Request ids are a sequence, so a form
 * that carried one would let anyone name the next request; the handle is the id's HMAC under the
 * user-code key (labelled, so it can never equal a user code's HMAC), 128 bits that only the
 * server can compute, and that need no column of their own.
 */
export function requestHandle(key: Buffer, requestId: string): string {
  return hmacSha256(key, `request-handle:${requestId}`).subarray(0, 16).toString('base64url');
}
