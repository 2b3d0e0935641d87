import { accessSync, constants, statSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import path from 'node:path';
import { z } from 'zod';

const seconds = (fallback: number) => z.coerce.number().int().positive().default(fallback);

/** 'false' (default), 'true' (trust any proxy: only behind one that overwrites the headers), or addresses/CIDRs. */
function parseTrustProxy(value: string): boolean | string[] {
  if (value === 'false') return false;
  if (value === 'true') return true;
  return value.split(',').map((s) => s.trim()).filter(Boolean);
}

/** "MAX/SECONDS" (e.g. "5/60"), or "off". */
const rateLimit = (fallback: string) =>
  z
    .string()
    .default(fallback)
    .refine((v) => v === 'off' || /^[1-9]\d*\/[1-9]\d*$/.test(v), 'must be MAX/SECONDS (e.g. 5/60) or off')
    .transform((v) => {
      if (v === 'off') return null;
      const [max, windowSeconds] = v.split('/').map(Number) as [number, number];
      return { max, windowSeconds };
    });

/**
 * Caught here, before the server touches its database, rather than when the file is opened: a
 * mistyped path is the usual mistake. Whether it is a City database is checked on opening.
 */
function unreadableFile(file: string): string | null {
  try {
    if (!statSync(file).isFile()) return `${file} is not a file`;
    accessSync(file, constants.R_OK);
    return null;
  } catch (error) {
    return `cannot read ${file} (${(error as NodeJS.ErrnoException).code ?? 'error'})`;
  }
}

/**
 * A key-encryption key: 32 bytes in base64 or base64url (`openssl rand -base64 32`). Anything else
 * is refused rather than hashed into shape, so that a truncated paste fails at start.
 */
const keyEncryptionKey = z
  .string()
  .regex(/^[A-Za-z0-9+/_-]{43}=?$/, 'must be 32 bytes in base64 or base64url (e.g. `openssl rand -base64 32`)')
  .transform((v) => Buffer.from(v.replace(/-/g, '+').replace(/_/g, '/'), 'base64'))
  .refine((key) => key.length === 32, 'must be 32 bytes in base64 or base64url (e.g. `openssl rand -base64 32`)');

/** What the approval page does about one proximity signal (oauth/device/proximity.ts). */
const policyAction = (fallback: 'allow' | 'warn' | 'confirm' | 'deny') => z.enum(['allow', 'warn', 'confirm', 'deny']).default(fallback);

export const ADMIN_SOCKET_NAME = 'admin.sock';

function adminSocketPath(given: string | undefined, databaseUrl: string | undefined, dataDir: string): string | null {
  if (given === 'off') return null;
  if (given !== undefined) return given;
  return databaseUrl || dataDir === 'memory://' ? null : path.join(dataDir, ADMIN_SOCKET_NAME);
}

const schema = z
  .object({
    PORT: z.coerce.number().int().min(0).max(65535).default(3000),
    HOST: z.string().min(1).default('0.0.0.0'),
    ISSUER: z.url({ protocol: /^https?$/ }).optional(),
    DATABASE_URL: z.url({ protocol: /^postgres(ql)?$/ }).optional(),
    DATA_DIR: z.string().min(1).default('./data'),
    MIGRATE_ON_START: z.enum(['true', 'false']).default('true').transform((v) => v === 'true'),
    DATABASE_POOL_SIZE: z.coerce.number().int().min(1).max(200).default(10),
    DATABASE_PREPARED_STATEMENTS: z.enum(['true', 'false']).default('true').transform((v) => v === 'true'),
    DEVICE_CODE_TTL: seconds(600),
    DEVICE_POLL_INTERVAL: seconds(5),
    ACCESS_TOKEN_TTL: seconds(3600),
    ID_TOKEN_TTL: seconds(3600),
    REFRESH_TOKEN_TTL: seconds(5_184_000),
    // A retried refresh within this many seconds of its rotation gets the same answer (0: never).
    REFRESH_RETRY_WINDOW: z.coerce.number().int().min(0).max(300).default(30),
    SESSION_TTL: seconds(12 * 3600),
    PURGE_INTERVAL: z.coerce.number().int().min(0).default(300),
    PURGE_BATCH_SIZE: z.coerce.number().int().min(1).max(100_000).default(500),
    LINK_RETENTION: z.coerce.number().int().min(0).default(30 * 86400),
    METRICS_TOKEN: z.string().min(16, 'must have at least 16 characters').optional(),
    REDIS_URL: z.url({ protocol: /^rediss?$/ }).optional(),
    ADMIN_TOKEN: z
      .string()
      .min(32, 'must have at least 32 characters')
      .max(512)
      .regex(/^[\x21-\x7e]+$/, 'must be printable ASCII without spaces (it travels in a header)')
      .optional(),
    ADMIN_HOST: z.string().min(1).default('127.0.0.1'),
    ADMIN_PORT: z.coerce.number().int().min(0).max(65535).optional(),
    ADMIN_SOCKET: z.string().min(1).optional(),
    ADMIN_URL: z.url({ protocol: /^https?$/ }).optional(),
    RATE_LIMIT_USER_CODE_PER_USER: rateLimit('5/60'),
    RATE_LIMIT_USER_CODE_PER_IP: rateLimit('5/60'),
    RATE_LIMIT_SIGNIN_PER_ACCOUNT_IP: rateLimit('5/900'),
    RATE_LIMIT_SIGNIN_PER_IP: rateLimit('30/900'),
    RATE_LIMIT_SIGNIN_PER_ACCOUNT: rateLimit('20/900'),
    SIGNIN_SLOWDOWN_MS: z.coerce.number().int().min(0).max(10_000).default(1000),
    RATE_LIMIT_DEVICE_CODE_PER_CLIENT: rateLimit('1200/60'),
    RATE_LIMIT_DEVICE_CODE_PER_IP: rateLimit('30/60'),
    RATE_LIMIT_TOKEN_PER_CLIENT: rateLimit('60000/60'),
    RATE_LIMIT_TOKEN_PER_IP: rateLimit('3000/60'),
    RATE_LIMIT_USERINFO_PER_IP: rateLimit('3000/60'),
    RATE_LIMIT_INTROSPECT_PER_IP: rateLimit('12000/60'),
    RATE_LIMIT_REVOKE_PER_IP: rateLimit('3000/60'),
    RATE_LIMIT_IPV6_PREFIX: z.coerce.number().int().min(32).max(128).default(64),
    RATE_LIMIT_NETWORK_SHARE: z.coerce.number().positive().max(1).default(0.001),
    PASSWORD_CHECKS_RUNNING: z.coerce.number().int().min(1).max(64).default(Math.max(1, availableParallelism())),
    PASSWORD_CHECKS_QUEUED: z.coerce.number().int().min(0).max(1000).default(16),
    PASSWORD_CHECKS_PER_IP: z.coerce.number().int().min(1).max(64).default(2),
    TRUST_PROXY: z.string().default('false'),
    PROXIMITY_POLICY_COUNTRY_MISMATCH: policyAction('confirm'),
    PROXIMITY_POLICY_HOSTING_NETWORK: policyAction('confirm'),
    PROXIMITY_POLICY_UNKNOWN_LOCATION: policyAction('warn'),
    PROXIMITY_POLICY_RELAY_NETWORK: policyAction('confirm'),
    // At the redeeming poll there is nobody to confirm: warn records the mismatch on the grant.
    PROXIMITY_POLICY_REDEEMER_MISMATCH: z.enum(['allow', 'warn', 'deny']).default('warn'),
    PROXIMITY_SAME_NETWORK_IPV6_PREFIX: z.coerce.number().int().min(32).max(128).default(64),
    SERVICE_NAME: z
      .string()
      .trim()
      .min(1)
      .max(60)
      .regex(/^[^\u0000-\u001f\u007f-\u009f]+$/, 'must not contain control characters')
      .default('device-auth'),
    SERVICE_LOGO_URL: z
      .string()
      .regex(/^\/(?!\/)[\x21-\x7e]*$/, 'must be a path on this server, like /static/logo.png (pages load nothing from other hosts)')
      .optional(),
    SERVICE_LOGO_FILE: z.string().min(1).optional(),
    GEOIP_DATABASE: z
      .string()
      .optional()
      .superRefine((file, context) => {
        const problem = file === undefined ? null : unreadableFile(file);
        if (problem) context.addIssue({ code: 'custom', message: problem });
      }),
    LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
    ICON_FETCH_CONCURRENCY: z.coerce.number().int().min(1).max(64).default(4),
    ICON_FETCH_ALLOW_LOOPBACK: z.enum(['true', 'false']).default('false').transform((v) => v === 'true'),
    DPOP_PROOF_WINDOW: z.coerce.number().int().min(5).max(600).default(60),
    DPOP_NONCES: z.enum(['true', 'false']).default('false').transform((v) => v === 'true'),
    DPOP_NONCE_PERIOD: z.coerce.number().int().min(10).max(86_400).default(300),
    NODE_ENV: z.string().optional(),
    KEY_ENCRYPTION_KEY: keyEncryptionKey.optional(),
    KEY_ENCRYPTION_KEY_PREVIOUS: keyEncryptionKey.optional(),
    DEVELOPMENT_SETUP: z.enum(['true', 'false']).default('false').transform((v) => v === 'true'),
    SIGNING_KEY_ROTATION_DAYS: z.coerce.number().positive().max(3650).default(90),
    JWKS_CACHE_SECONDS: z.coerce.number().int().min(0).max(86400).default(300),
    // Connections (issue 28 §2): no socket is held for ever by a client that stalls.
    HTTP_HEADERS_TIMEOUT: z.coerce.number().int().min(1).max(300).default(10),
    HTTP_REQUEST_TIMEOUT: z.coerce.number().int().min(1).max(600).default(30),
    HTTP_KEEP_ALIVE_TIMEOUT: z.coerce.number().int().min(1).max(3600).default(65),
    HTTP_MAX_REQUESTS_PER_SOCKET: z.coerce.number().int().min(0).max(1_000_000).default(1000),
    HTTP_MAX_CONNECTIONS: z.coerce.number().int().min(1).max(1_000_000).default(4096),
    ICON_STORAGE_PER_APP: z.coerce.number().int().min(65_536).max(1_073_741_824).default(2 * 1024 * 1024),
    ICON_STORAGE_TOTAL: z.coerce.number().int().min(65_536).max(68_719_476_736).default(64 * 1024 * 1024),
  })
  // A database server is shared and backed up elsewhere: the key that protects its private keys
  // must come from elsewhere too. Only a development setup may keep one in DATA_DIR.
  .refine((env) => env.DATABASE_URL === undefined || env.KEY_ENCRYPTION_KEY !== undefined || env.DEVELOPMENT_SETUP, {
    message:
      'is required with DATABASE_URL: 32 random bytes in base64 (`openssl rand -base64 32`), kept apart from the database. ' +
      'For a development setup only, DEVELOPMENT_SETUP=true keeps a generated key in DATA_DIR instead',
    path: ['KEY_ENCRYPTION_KEY'],
  })
  .refine((env) => env.KEY_ENCRYPTION_KEY_PREVIOUS === undefined || env.KEY_ENCRYPTION_KEY !== undefined, {
    message: 'needs KEY_ENCRYPTION_KEY (the new key) beside it',
    path: ['KEY_ENCRYPTION_KEY_PREVIOUS'],
  })
  // The admin API on a TCP port is reachable by whoever can reach the port: never without a token.
  .refine((env) => env.ADMIN_PORT === undefined || env.ADMIN_TOKEN !== undefined, {
    message: 'ADMIN_PORT needs ADMIN_TOKEN (at least 32 characters, e.g. `openssl rand -hex 32`); without it the admin API answers only on its Unix socket',
    path: ['ADMIN_PORT'],
  })
  // A test's icon server listens on loopback; in production the same switch would let any device
  // make the server fetch from its own host.
  .refine((env) => !(env.ICON_FETCH_ALLOW_LOOPBACK && env.NODE_ENV === 'production'), {
    message: 'is for tests only and refused when NODE_ENV=production',
    path: ['ICON_FETCH_ALLOW_LOOPBACK'],
  })
  // Node refuses a header timeout longer than the request timeout it is part of.
  .refine((env) => env.HTTP_HEADERS_TIMEOUT <= env.HTTP_REQUEST_TIMEOUT, {
    message: 'must not exceed HTTP_REQUEST_TIMEOUT (the headers are part of the request)',
    path: ['HTTP_HEADERS_TIMEOUT'],
  })
  .transform((env) => {
    const issuer = (env.ISSUER ?? `http://localhost:${env.PORT}`).replace(/\/+$/, '');
    return {
      port: env.PORT,
      host: env.HOST,
      issuer,
      secureCookies: issuer.startsWith('https://'),
      databaseUrl: env.DATABASE_URL,
      dataDir: env.DATA_DIR,
      migrateOnStart: env.MIGRATE_ON_START,
      databasePoolSize: env.DATABASE_POOL_SIZE,
      databasePreparedStatements: env.DATABASE_PREPARED_STATEMENTS,
      deviceCodeTtl: env.DEVICE_CODE_TTL,
      devicePollInterval: env.DEVICE_POLL_INTERVAL,
      accessTokenTtl: env.ACCESS_TOKEN_TTL,
      idTokenTtl: env.ID_TOKEN_TTL,
      refreshTokenTtl: env.REFRESH_TOKEN_TTL,
      refreshRetryWindow: env.REFRESH_RETRY_WINDOW,
      sessionTtl: env.SESSION_TTL,
      logLevel: env.LOG_LEVEL,
      trustProxy: parseTrustProxy(env.TRUST_PROXY),
      /** A MaxMind GeoIP2/GeoLite2 City database, for city names; the shipped data gives country and network without it. */
      geoipDatabase: env.GEOIP_DATABASE,
      metricsToken: env.METRICS_TOKEN,
      redisUrl: env.REDIS_URL,
      proximityPolicy: {
        country_mismatch: env.PROXIMITY_POLICY_COUNTRY_MISMATCH,
        hosting_network: env.PROXIMITY_POLICY_HOSTING_NETWORK,
        unknown_location: env.PROXIMITY_POLICY_UNKNOWN_LOCATION,
        relay_network: env.PROXIMITY_POLICY_RELAY_NETWORK,
        redeemer_mismatch: env.PROXIMITY_POLICY_REDEEMER_MISMATCH,
      },
      /** Two IPv6 addresses in one prefix of this length count as one network on the approval page. */
      sameNetworkIpv6Prefix: env.PROXIMITY_SAME_NETWORK_IPV6_PREFIX,
      serviceName: env.SERVICE_NAME,
      /** A path on our own origin; SERVICE_LOGO_FILE is served at /static/logo and wins. */
      serviceLogoUrl: env.SERVICE_LOGO_FILE ? '/static/logo' : env.SERVICE_LOGO_URL,
      serviceLogoFile: env.SERVICE_LOGO_FILE,
      admin: {
        token: env.ADMIN_TOKEN,
        host: env.ADMIN_HOST,
        port: env.ADMIN_PORT,
        /**
         * In embedded mode the socket lives in DATA_DIR by default, where the CLI finds it; on
         * PostgreSQL there is no folder of the server's own, so only where ADMIN_SOCKET says.
         * "off" turns it off.
         */
        socket: adminSocketPath(env.ADMIN_SOCKET, env.DATABASE_URL, env.DATA_DIR),
        /** For the CLI: a running server's admin API elsewhere (ADMIN_TOKEN goes with it). */
        url: env.ADMIN_URL?.replace(/\/+$/, ''),
      },
      rateLimits: {
        userCodePerUser: env.RATE_LIMIT_USER_CODE_PER_USER,
        userCodePerIp: env.RATE_LIMIT_USER_CODE_PER_IP,
        signInPerAccountIp: env.RATE_LIMIT_SIGNIN_PER_ACCOUNT_IP,
        signInPerIp: env.RATE_LIMIT_SIGNIN_PER_IP,
        signInPerAccount: env.RATE_LIMIT_SIGNIN_PER_ACCOUNT,
        deviceCodePerClient: env.RATE_LIMIT_DEVICE_CODE_PER_CLIENT,
        deviceCodePerIp: env.RATE_LIMIT_DEVICE_CODE_PER_IP,
        tokenPerClient: env.RATE_LIMIT_TOKEN_PER_CLIENT,
        tokenPerIp: env.RATE_LIMIT_TOKEN_PER_IP,
        userinfoPerIp: env.RATE_LIMIT_USERINFO_PER_IP,
        introspectPerIp: env.RATE_LIMIT_INTROSPECT_PER_IP,
        revokePerIp: env.RATE_LIMIT_REVOKE_PER_IP,
      },
      ipv6Prefix: env.RATE_LIMIT_IPV6_PREFIX,
      /** Once an app's budget is spent, the fraction of it each network (address, /24, /64, /56, /48) may still use. */
      networkShare: env.RATE_LIMIT_NETWORK_SHARE,
      signInSlowdownMs: env.SIGNIN_SLOWDOWN_MS,
      passwordChecks: {
        running: env.PASSWORD_CHECKS_RUNNING,
        queued: env.PASSWORD_CHECKS_QUEUED,
        perAddress: env.PASSWORD_CHECKS_PER_IP,
      },
      iconFetch: {
        /** Fetches of platform icons running at once; a request past it gets no icon. */
        concurrency: env.ICON_FETCH_CONCURRENCY,
        /** Tests only: loopback addresses count as public. */
        allowLoopback: env.ICON_FETCH_ALLOW_LOOPBACK,
        /** Bytes of stored icons one app's requests may hold, and all apps together; past either, a new icon is not stored. */
        storagePerApp: env.ICON_STORAGE_PER_APP,
        storageTotal: env.ICON_STORAGE_TOTAL,
      },
      dpop: {
        /** RFC 9449 §11.1: a proof's iat may be this many seconds before or after the server's clock. */
        proofWindowSeconds: env.DPOP_PROOF_WINDOW,
        /** RFC 9449 §8/§9: proofs must carry a nonce of ours (stateless, valid for 1-2 periods). */
        nonces: env.DPOP_NONCES,
        noncePeriodSeconds: env.DPOP_NONCE_PERIOD,
      },
      keyEncryption: {
        /** Null: the key file in DATA_DIR (embedded, or DEVELOPMENT_SETUP), or a key for this process alone (memory://). */
        current: env.KEY_ENCRYPTION_KEY ?? null,
        /** Still opens what it sealed, while `device-auth keys rewrap` re-seals it under the current key. */
        previous: env.KEY_ENCRYPTION_KEY_PREVIOUS ?? null,
        developmentSetup: env.DEVELOPMENT_SETUP,
      },
      signingKeys: {
        rotationSeconds: Math.round(env.SIGNING_KEY_ROTATION_DAYS * 86400),
        /** The JWKS's Cache-Control max-age, and so how long before it signs a new key must be published. */
        jwksCacheSeconds: env.JWKS_CACHE_SECONDS,
      },
      http: {
        /** All of a request's headers must arrive within this many seconds of its first byte. */
        headersTimeoutSeconds: env.HTTP_HEADERS_TIMEOUT,
        /** The whole request, body included (at most 64 KiB), within this many seconds; else 408 and the socket closes. */
        requestTimeoutSeconds: env.HTTP_REQUEST_TIMEOUT,
        /** An idle keep-alive connection is closed after this long; keep it above a load balancer's idle timeout. */
        keepAliveTimeoutSeconds: env.HTTP_KEEP_ALIVE_TIMEOUT,
        /** A keep-alive connection is closed after this many requests (0: never). */
        maxRequestsPerSocket: env.HTTP_MAX_REQUESTS_PER_SOCKET,
        /** Connections past this many are closed at once, so descriptors stay for the database and the admin API. */
        maxConnections: env.HTTP_MAX_CONNECTIONS,
      },
      purgeIntervalSeconds: env.PURGE_INTERVAL,
      purge: {
        batchSize: env.PURGE_BATCH_SIZE,
        maxBatches: 1000,
        grantRetentionSeconds: env.LINK_RETENTION,
        deviceRequestRetentionSeconds: 3600,
        unusedIconRetentionSeconds: 3600,
      },
    };
  });

export type Config = Readonly<z.output<typeof schema>>;

export class ConfigError extends Error {}

/** The only reader of process.env. A bad value becomes one line naming the variable. */
export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  // An empty variable means "unset", as in most shells' `FOO= cmd`.
  const present = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ''));
  const parsed = schema.safeParse(present);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const name = issue?.path.join('.') ?? 'environment';
    throw new ConfigError(`invalid configuration: ${name}: ${issue?.message ?? 'invalid value'}`);
  }
  return Object.freeze(parsed.data);
}
