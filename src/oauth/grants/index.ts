import type { Grant } from './types.js';
import * as deviceCode from './device-code.js';
import * as refreshToken from './refresh-token.js';

/** The token endpoint's grants, by grant_type. */
export const grants: ReadonlyMap<string, Grant> = new Map<string, Grant>([
  [deviceCode.grantType, deviceCode as Grant],
  [refreshToken.grantType, refreshToken as Grant],
]);
