import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { ConfigError, type Config } from './config.js';
import type { Database, DatabaseHandle } from './db/connect.js';
import type { Clock } from './lib/clock.js';
import { createMetrics, type Metrics } from './lib/metrics.js';
import { PasswordChecks } from './accounts/password-checks.js';
import { RateLimiter } from './rate-limits/limiter.js';
import { databaseCounterStore, redisCounterStore, type CounterStore, type OnceStore } from './rate-limits/store.js';
import { KeyRing } from './oauth/keys.js';
import { asConfigError, ensureServerSecret, loadSealer, sealClearRows } from './oauth/key-encryption.js';
import type { Sealer } from './lib/sealing.js';
import { ClientDirectory } from './oauth/client-auth.js';
import { CheckedProofHeaders } from './oauth/dpop.js';
import { Housekeeping } from './oauth/housekeeping.js';
import { describeUnavailable, isDatabaseUnavailable } from './db/unavailable.js';
import { GeoDatabaseError, geoOnFirstUse, loadGeo, type Geo } from './geo/locate.js';
import { PlatformIcons } from './oauth/device/platform-icons.js';
import { resolveWithSystem, type HostResolver } from './oauth/device/icon-fetch.js';

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
  usedProofs: OnceStore;
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
  /** Releases what createDeps opened besides the database (the Redis connection, the client changes listener). */
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

export async function createDeps(options: {
  database: DatabaseHandle;
  config: Config;
  log: Logger;
  clock: Clock;
  /** Test seams of the icon fetcher: a resolver that never leaves the machine, and the test server's certificate. */
  iconFetching?: { resolve?: HostResolver; extraCertificates?: readonly string[] };
  /**
   * When the location data is read: at start (a server, so that no request waits for it) or at
   * its first use (the CLI, most of whose commands never use it).
   */
  locationData?: 'at-start' | 'on-first-use';
}): Promise<Deps> {
  const { database, config, log, clock } = options;
  const locationOptions = { cityDatabase: config.geoipDatabase, trustedProxies: Array.isArray(config.trustProxy) ? config.trustProxy : [] };
  const geo =
    options.locationData === 'on-first-use'
      ? geoOnFirstUse(locationOptions)
      : await loadGeo(locationOptions).catch((error: unknown) => {
          if (error instanceof GeoDatabaseError) throw new ConfigError(`invalid configuration: GEOIP_DATABASE: ${error.message}`);
          throw error;
        });
  const sealer = loadSealer(config, log);
  // Every secret goes through ensureServerSecret, which seals it: the database never holds one in the clear.
  const secret = (name: string) => ensureServerSecret(database.db, sealer, name, randomBytes(32));
  let userCodeKey: Buffer;
  let anonymousCsrfKey: Buffer;
  let refreshRetryKey: Buffer;
  let dpopNonceKey: Buffer;
  const keys = new KeyRing(database.db, sealer, clock, log, {
    rotationSeconds: config.signingKeys.rotationSeconds,
    jwksCacheSeconds: config.signingKeys.jwksCacheSeconds,
    idTokenTtlSeconds: config.idTokenTtl,
  });
  try {
    const sealed = await sealClearRows(database.db, sealer);
    if (sealed.signingKeys + sealed.serverSecrets > 0) log.info(sealed, 'sealed private keys and secrets stored in the clear by an earlier version');
    userCodeKey = await secret('user_code_hmac_key');
    anonymousCsrfKey = await secret('anonymous_csrf_hmac_key');
    refreshRetryKey = await secret('refresh_retry_hmac_key');
    dpopNonceKey = await secret('dpop_nonce_hmac_key');
    await keys.maintain();
  } catch (error) {
    // A sealed value that does not open means the wrong KEY_ENCRYPTION_KEY: one line, exit 2.
    throw asConfigError(error);
  }
  const metrics = createMetrics(() => database.poolStats());
  const counters = config.redisUrl ? await redisCounterStore(config.redisUrl, clock) : databaseCounterStore(database.db);
  const rateLimiter = new RateLimiter(counters, config.rateLimits, config.networkShare);
  const housekeeping = new Housekeeping(database.db, clock, config.purge, config.purgeIntervalSeconds, (run, error) => {
    if (run.outcome === 'done') log.info({ purged: run.purged }, 'purge done');
    // While the database is away this fails every tick: one line each, without a stack.
    else log.warn(isDatabaseUnavailable(error) ? describeUnavailable(error) : { err: error }, 'purge failed');
  });
  if (config.iconFetch.allowLoopback) {
    log.warn('ICON_FETCH_ALLOW_LOOPBACK is on: any device can make this server fetch from its own host. For tests only.');
  }
  const platformIcons = new PlatformIcons(database.db, clock, log, metrics, {
    concurrency: config.iconFetch.concurrency,
    storage: { perApp: config.iconFetch.storagePerApp, total: config.iconFetch.storageTotal },
    fetch: {
      resolve: options.iconFetching?.resolve ?? resolveWithSystem,
      addressRule: { allowLoopback: config.iconFetch.allowLoopback },
      userAgent: `device-auth-icon-fetcher/1 (+${config.issuer})`,
      extraCertificates: options.iconFetching?.extraCertificates,
    },
  });
  // Last, so that nothing after it can fail and leave its connection open.
  const clients = new ClientDirectory(database.db, clock, log);
  await clients.follow(database);
  await keys.follow(database);
  return {
    db: database.db,
    database,
    config,
    log,
    clock,
    keys,
    sealer,
    secrets: { userCodeKey, anonymousCsrfKey, refreshRetryKey, dpopNonceKey },
    metrics,
    rateLimiter,
    usedProofs: counters,
    counterStore: counters,
    proofHeaders: new CheckedProofHeaders(),
    passwordChecks: new PasswordChecks(config.passwordChecks),
    clients,
    geo,
    housekeeping,
    platformIcons,
    async close() {
      housekeeping.stop();
      await platformIcons.close();
      await clients.close();
      await keys.close();
      await rateLimiter.close();
      await counters.close();
    },
  };
}
