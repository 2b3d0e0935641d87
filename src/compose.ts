import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { PasswordChecks } from './accounts/password-checks.js';
import { ClientDirectory } from './apps/directory.js';
import { ConfigError, type Config } from './config.js';
import type { DatabaseHandle } from './db/connect.js';
import { connectRedis } from './db/redis.js';
import { describeUnavailable, isDatabaseUnavailable } from './db/unavailable.js';
import type { Deps } from './deps.js';
import { GeoDatabaseError, geoOnFirstUse, loadGeo } from './geo/locate.js';
import { Housekeeping } from './housekeeping/purge.js';
import { asConfigError, ensureServerSecret, loadSealer, sealClearRows } from './keys/key-encryption.js';
import { KeyRing } from './keys/signing-keys.js';
import type { Clock } from './lib/clock.js';
import { createMetrics } from './lib/metrics.js';
import { resolveWithSystem, type HostResolver } from './lib/outbound-address.js';
import { PlatformIcons } from './oauth/device/platform-icons.js';
import { CheckedProofHeaders } from './oauth/dpop-headers.js';
import { databaseDpopReplayStore, redisDpopReplayStore } from './oauth/dpop-replay.js';
import { RateLimiter } from './rate-limits/limiter.js';
import { databaseCounterStore, redisCounterStore } from './rate-limits/store.js';
import { DevicePolicies } from './oauth/device/policies.js';
import { ForwardingSightings } from './lib/forwarding-sightings.js';
import { OutboundDeliveries } from './delivery/engine.js';
import { webhookFanOut, webhookKind } from './webhooks/delivery.js';

/** A receiver has this long to answer a delivery; its other messages and every other receiver's go on meanwhile. */
const OUTBOUND_TIMEOUT_MS = 10_000;
import { ssfPushKind } from './ssf/push.js';
import { SsfTransmitter } from './ssf/transmitter.js';

/**
 * The composition root: the one place that makes every service and hands them, as Deps, to the
 * applications (server.ts, the CLI's in-process admin API, the tests' helpers). Nothing imports
 * it but those entry points.
 */
export async function createDeps(options: {
  database: DatabaseHandle;
  config: Config;
  log: Logger;
  clock: Clock;
  /** Test seams of the icon fetcher: a resolver that never leaves the machine, and the test server's certificate. */
  iconFetching?: { resolve?: HostResolver; extraCertificates?: readonly string[] };
  /** The same seams for deliveries of events (webhooks, Shared Signals push). */
  outbound?: { resolve?: HostResolver; extraCertificates?: readonly string[] };
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
  const redis = config.redisUrl ? await connectRedis(config.redisUrl) : null;
  const counters = redis ? redisCounterStore(redis) : databaseCounterStore(database.db);
  const usedProofs = redis ? redisDpopReplayStore(redis, clock) : databaseDpopReplayStore(database.db);
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
  if (config.events.allowLoopback) {
    log.warn('EVENTS_ALLOW_LOOPBACK is on: webhook and Shared Signals receivers may be on this host, over plain http. For tests and local receivers only.');
  }
  // Started by the server (deliveries.start()), not by the CLI's in-process admin API.
  const deliveries = new OutboundDeliveries(database.db, clock, log, {
    retryBaseSeconds: config.events.retryBaseSeconds,
    pauseAfterSeconds: config.events.pauseAfterSeconds,
    outbound: {
      resolve: options.outbound?.resolve ?? resolveWithSystem,
      allowLoopback: config.events.allowLoopback,
      userAgent: `device-auth-events/1 (+${config.issuer})`,
      timeoutMs: OUTBOUND_TIMEOUT_MS,
      extraCertificates: options.outbound?.extraCertificates,
    },
  });
  deliveries.register(webhookKind({ clock, sealer }));
  deliveries.addSource(webhookFanOut());
  const sharedSignals = new SsfTransmitter(clock, config.issuer);
  deliveries.register(ssfPushKind({ issuer: config.issuer, keys, clock, sealer }));
  deliveries.addSource(sharedSignals);
  // Last, so that nothing after it can fail and leave its connection open.
  const clients = new ClientDirectory(database.db, clock, log);
  const devicePolicies = new DevicePolicies(database.db, config, log, metrics, clock);
  await clients.follow(database);
  await keys.follow(database);
  await devicePolicies.follow(database);
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
    usedProofs,
    counterStore: counters,
    proofHeaders: new CheckedProofHeaders(),
    passwordChecks: new PasswordChecks(config.passwordChecks),
    clients,
    geo,
    housekeeping,
    platformIcons,
    devicePolicies,
    forwardingSightings: new ForwardingSightings(),
    deliveries,
    sharedSignals,
    async close() {
      housekeeping.stop();
      sharedSignals.close();
      await deliveries.stop();
      await platformIcons.close();
      await clients.close();
      await keys.close();
      await devicePolicies.close();
      await rateLimiter.close();
      await counters.close();
    },
  };
}
