import { createHash } from 'node:crypto';

/** RFC 7636 §4.1: 43 to 128 unreserved characters. */
const VERIFIER = /^[A-Za-z0-9\-._~]{43,128}$/;
/** The S256 challenge: a SHA-256 digest in base64url without padding, always 43 characters. */
export const S256_CHALLENGE = /^[A-Za-z0-9_-]{43}$/;

export function s256Challenge(verifier: string): string {
  return createHash('sha256').update(verifier, 'ascii').digest('base64url');
}

/**
 * RFC 7636 §4.6, S256 only (OAuth 2.1 §7.5.2: plain is not offered). The S256 challenge of a
 * verifier of the right shape (RFC 7636 §4.1), else null: what a code's
 * redemption looks its code up by, so that a wrong verifier finds nothing to spend.
 */
export function challengeOfVerifier(verifier: string | undefined): string | null {
  return verifier !== undefined && VERIFIER.test(verifier) ? s256Challenge(verifier) : null;
}
