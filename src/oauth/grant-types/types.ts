import type { z } from 'zod';
import type { Deps } from '../../deps.js';
import type { Client } from '../client-auth.js';
import type { TokenResponse } from '../token-response.js';
import type { DevicePolicy } from '../device/policy.js';

export interface GrantContext {
  /** The caller's IP, recorded with lifecycle events. */
  ip: string;
  /** RFC 9449: the key of the request's verified DPoP proof, or null without one. */
  dpopJkt: string | null;
  /**
   * Records the request's DPoP proof as used (nothing without one), refusing a proof already used
   * with invalid_dpop_proof. Each grant calls it once it found its credential (the app's, and of the
   * proof's key if bound), before anything the proof makes possible: a proof sent with a junk
   * credential writes nothing (issue 28 §2).
   */
  spendProof(): Promise<void>;
  /** The operator's device policy for the app (issue 31 §2): the device_code grant judges its polls by it. */
  devicePolicy: DevicePolicy;
}

/** One module per grant type, all of this shape, dispatched by the token route. */
export interface GrantType<S extends z.ZodType = z.ZodType> {
  grantType: string;
  parameters: S;
  handle(deps: Deps, client: Client, form: z.output<S>, context: GrantContext): Promise<TokenResponse>;
}
