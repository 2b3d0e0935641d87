import type { Logger } from 'pino';
import type { PasswordChecks } from './accounts/password-checks.js';
import type { ClientDirectory } from './apps/directory.js';
import type { Config } from './config.js';
import type { Database, DatabaseHandle } from './db/connect.js';
import type { OutboundDeliveries } from './delivery/engine.js';
import type { Geo } from './geo/locate.js';
import type { Housekeeping } from './housekeeping/purge.js';
import type { Sealer } from './keys/sealing.js';
import type { KeyRing } from './keys/signing-keys.js';
import type { Clock } from './lib/clock.js';
import type { Metrics } from './lib/metrics.js';
import type { PlatformIcons } from './oauth/device/platform-icons.js';
import type { DevicePolicies } from './oauth/device/policies.js';
import type { ForwardingSightings } from './lib/forwarding-sightings.js';
import type { CheckedProofHeaders } from './oauth/dpop-headers.js';
import type { DpopReplayStore } from './oauth/dpop-replay.js';
import type { RateLimiter } from './rate-limits/limiter.js';
import type { CounterStore } from './rate-limits/store.js';
import type { SsfTransmitter } from './ssf/transmitter.js';

/*
 * The type of the dependencies, and nothing else: every room takes the part of it it uses
 * (Pick<Deps, ...>), and this file imports only types, so that naming it never pulls in what it
 * names. compose.ts makes one (createDeps) at start; test/architecture/import-graph.test.ts checks
 * that this file stays a type.
 */

/** Everything the domain needs, created once at start and passed down explicitly. */
export interface Deps {
  db: Database;
  database: DatabaseHandle;
  config: Config;
  log: Logger;
  clock: Clock;
  /** The signing keys: which one signs and what the JWKS holds, in memory, shared through the database. */
  keys: KeyRing;
  /** Seals and opens what the database holds under the key-encryption key. */
  sealer: Sealer;
  secrets: ServerSecrets;
  metrics: Metrics;
  rateLimiter: RateLimiter;
  /** DPoP proofs already used (RFC 9449 §11.1), shared by every instance: the database, or Redis with REDIS_URL. */
  usedProofs: DpopReplayStore;
  /** Where counters and used proofs live, as /readyz asks whether it answers. */
  counterStore: Pick<CounterStore, 'ping'>;
  /** DPoP proof headers already checked, with their keys (oauth/dpop.ts). */
  proofHeaders: CheckedProofHeaders;
  passwordChecks: PasswordChecks;
  clients: ClientDirectory;
  /** Country and network of an address, from data on this machine. */
  geo: Geo;
  /** The purge: scheduled by the server, run on demand by the admin API. */
  housekeeping: Housekeeping;
  /** Fetches devices' platform icons in the background and stores them. */
  platformIcons: PlatformIcons;
  /** The operator's device-flow rules, in memory on every instance (issue 31 §2). */
  devicePolicies: DevicePolicies;
  /** Forwarded requests from a peer TRUST_PROXY does not name, as /readyz and the assessment report them. */
  forwardingSightings: ForwardingSightings;
  /** The outbound delivery engine of webhooks and Shared Signals push: started by the server, stepped by hand in tests. */
  deliveries: OutboundDeliveries;
  /** The Shared Signals transmitter's fan-out of committed events into SETs (issue 32 §3); a source of the delivery engine, which runs it. */
  sharedSignals: SsfTransmitter;
  /** Releases what createDeps (compose.ts) opened besides the database (the Redis connection, the client changes listener). */
  close(): Promise<void>;
}

export interface ServerSecrets {
  /** HMAC key for user codes: they are too short to be stored as a bare hash. */
  userCodeKey: Buffer;
  /**
   * HMAC key for the CSRF tokens of anonymous forms, a key of its own rather than one derived from
   * userCodeKey: replacing it only expires the sign-in forms open at that moment, and no other
   * value in the system is ever computed under it.
   */
  anonymousCsrfKey: Buffer;
  /**
   * HMAC key from which a refresh token's successors are computed, so that a retried refresh can
   * be given the same answer without keeping its tokens anywhere in clear.
   */
  refreshRetryKey: Buffer;
  /** HMAC key of DPoP nonces (RFC 9449 §8): stateless, so every instance accepts every other's. */
  dpopNonceKey: Buffer;
}
