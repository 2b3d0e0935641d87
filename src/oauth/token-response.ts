import { formatScope } from './scopes.js';

/** RFC 6749 §5.1 (+ OpenID Connect id_token). */
export interface TokenResponse {
  access_token: string;
  token_type: 'Bearer';
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
}): TokenResponse {
  return {
    access_token: issued.accessToken,
    token_type: 'Bearer',
    expires_in: issued.expiresIn,
    ...(issued.refreshToken ? { refresh_token: issued.refreshToken } : {}),
    scope: formatScope(issued.scopes),
    ...(issued.idToken ? { id_token: issued.idToken } : {}),
  };
}
