import type { GrantType } from './types.js';
import * as authorizationCode from './authorization-code.js';
import * as clientCredentials from './client-credentials.js';
import * as deviceCode from './device-code.js';
import * as refreshToken from './refresh-token.js';

/** The token endpoint's grant types, by grant_type. */
export const grantTypes: ReadonlyMap<string, GrantType> = new Map<string, GrantType>([
  [authorizationCode.grantType, authorizationCode as GrantType],
  [deviceCode.grantType, deviceCode as GrantType],
  [refreshToken.grantType, refreshToken as GrantType],
  [clientCredentials.grantType, clientCredentials as GrantType],
]);
