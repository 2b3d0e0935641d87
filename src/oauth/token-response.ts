import { formatScope } from './scopes.js';

/** RFC 6749 §5.1 (+ OpenID Connect id_token). */
export interface TokenResponse {
  access_token: string;
  /** RFC 9449 §5: DPoP for a token bound to a key, which only a request with a proof of that key may use. */
  token_type: 'Bearer' | 'DPoP';
  expires_in: number;
  refresh_token?: string;
  scope: string;
  id_token?: string;
}

export function toTokenResponse(issued: {
  accessToken: string;
  expiresIn: number;
  refreshToken: string | null;
  scopes: readonly string[];
  idToken: string | null;
  /** The key the access token is bound to, if any. */
  dpopJkt: string | null;
}): TokenResponse {
  return {
    access_token: issued.accessToken,
    token_type: issued.dpopJkt === null ? 'Bearer' : 'DPoP',
    expires_in: issued.expiresIn,
    ...(issued.refreshToken ? { refresh_token: issued.refreshToken } : {}),
    scope: formatScope(issued.scopes),
    ...(issued.idToken ? { id_token: issued.idToken } : {}),
  };
}
