import type { Grant } from './types.js';
import * as deviceCode from './device-code.js';

/** The token endpoint's grants, by grant_type. */
export const grants: ReadonlyMap<string, Grant> = new Map<string, Grant>([[deviceCode.grantType, deviceCode as Grant]]);
