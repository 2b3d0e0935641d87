import { keyNotProven, type ProofDeps, readDpopProof, spendDpopProof, verifyReadProof } from './dpop.js';

/** RFC 6750 §2.1 b64token after the scheme, which RFC 7235 §2.1 makes case-insensitive. */
const AUTHORIZATION = /^(Bearer|DPoP) ([A-Za-z0-9\-._~+/]+=*)$/i;

export type Scheme = 'bearer' | 'dpop';

export interface PresentedToken {
  scheme: Scheme;
  token: string;
}

/** The scheme and token of an Authorization header; null when it is not `Bearer <token>` or `DPoP <token>`. */
export function parseAuthorization(header: string): PresentedToken | null {
  const match = AUTHORIZATION.exec(header);
  if (!match?.[1] || !match[2]) return null;
  return { scheme: match[1].toLowerCase() === 'dpop' ? 'dpop' : 'bearer', token: match[2] };
}

/** The request a token was presented with, as far as its proof is concerned. */
export interface PresentationRequest {
  /** The DPoP header as received. */
  dpop: string | string[] | undefined;
  method: string;
  /** The resource's URL as this server names it (from ISSUER), which the proof's htu must name. */
  url: string;
}

/**
 * RFC 9449 §7 at a resource (userinfo, the Shared Signals endpoints): the live token presented,
 * found by `lookUp`, and under the DPoP scheme the proof of the key it is bound to. In this order,
 * so that a junk token costs no public-key operation and writes nothing (issue 28 §2): the proof's
 * claims (ath naming this token), the token, the proof's signature, and last the proof recorded
 * as used, only once the token turned out to be live and bound to its key. A bound token presented
 * as Bearer is refused whoever presents it (§7.2); a proof with a token bound to no key is refused
 * rather than half-checked. `refuse` words a refusal of the token in the scheme's challenge.
 */
export async function acceptPresentedToken<T extends { dpopJkt: string | null }>(
  deps: ProofDeps,
  presented: PresentedToken,
  request: PresentationRequest,
  lookUp: (token: string) => Promise<T | null>,
  refuse: (scheme: Scheme, description: string) => Error,
): Promise<T> {
  const read =
    presented.scheme === 'dpop'
      ? readDpopProof(deps, { header: request.dpop, method: request.method, url: request.url, accessToken: presented.token }, 'resource')
      : null;
  if (presented.scheme === 'dpop' && !read) throw keyNotProven('resource', 'the DPoP scheme needs a DPoP proof header');
  const token = await lookUp(presented.token);
  if (!token) throw refuse(presented.scheme, 'the access token is invalid, expired or revoked');
  const proof = read && (await verifyReadProof(deps, read, 'resource'));
  if (token.dpopJkt !== null) {
    if (!proof) throw refuse('dpop', 'this access token is bound to a DPoP key: present it with Authorization: DPoP and a proof');
    if (proof.jkt !== token.dpopJkt) throw refuse('dpop', "the DPoP proof's key is not the key this access token is bound to");
    await spendDpopProof(deps, proof, 'resource');
  } else if (proof) {
    throw refuse('dpop', 'this access token is not bound to a DPoP key: present it as Bearer');
  }
  return token;
}
