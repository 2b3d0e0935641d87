import { accessSync, constants, statSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import path from 'node:path';
import { z } from 'zod';

const seconds = (fallback: number) => z.coerce.number().int().positive().default(fallback);

/** 'false' (default), 'true' (trust any proxy: only behind one that overwrites the headers), or addresses/CIDRs. */
function parseTrustProxy(value: string): boolean | string[] {
  if (value === 'false') return false;
  if (value === 'true') return true;
  return value
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
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

const ADMIN_SOCKET_NAME = 'admin.sock';

function adminSocketPath(given: string | undefined, databaseUrl: string | undefined, dataDir: string): string | null {
  if (given === 'off') return null;
  if (given !== undefined) return given;
  return databaseUrl || dataDir === 'memory://' ? null : path.join(dataDir, ADMIN_SOCKET_NAME);
}

/**
 * Every environment variable the server reads, with its default and the values it accepts.
 * docs/configuration.md is written from this and VARIABLE_DOCS below (`npm run docs:config`).
 */
export const environmentVariables = z.object({
  PORT: z.coerce.number().int().min(0).max(65535).default(3000),
  HOST: z.string().min(1).default('0.0.0.0'),
  ISSUER: z.url({ protocol: /^https?$/ }).optional(),
  DATABASE_URL: z.url({ protocol: /^postgres(ql)?$/ }).optional(),
  DATA_DIR: z.string().min(1).default('./data'),
  MIGRATE_ON_START: z
    .enum(['true', 'false'])
    .default('true')
    .transform((v) => v === 'true'),
  DATABASE_POOL_SIZE: z.coerce.number().int().min(1).max(200).default(10),
  DATABASE_PREPARED_STATEMENTS: z
    .enum(['true', 'false'])
    .default('true')
    .transform((v) => v === 'true'),
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
  LINK_RETENTION: z.coerce
    .number()
    .int()
    .min(0)
    .default(30 * 86400),
  EVENT_RETENTION_DAYS: z.coerce.number().int().min(0).max(36_500).default(90),
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
  RATE_LIMIT_INTROSPECT_PER_CLIENT: rateLimit('240000/60'),
  RATE_LIMIT_INTROSPECT_PER_IP: rateLimit('12000/60'),
  RATE_LIMIT_REVOKE_PER_CLIENT: rateLimit('60000/60'),
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
  ICON_FETCH_ALLOW_LOOPBACK: z
    .enum(['true', 'false'])
    .default('false')
    .transform((v) => v === 'true'),
  EVENTS_RETRY_BASE_SECONDS: z.coerce.number().int().min(1).max(3600).default(5),
  EVENTS_PAUSE_AFTER_HOURS: z.coerce.number().positive().max(71).default(12),
  EVENTS_ALLOW_LOOPBACK: z
    .enum(['true', 'false'])
    .default('false')
    .transform((v) => v === 'true'),
  DPOP_PROOF_WINDOW: z.coerce.number().int().min(5).max(600).default(60),
  DPOP_NONCES: z
    .enum(['true', 'false'])
    .default('false')
    .transform((v) => v === 'true'),
  DPOP_NONCE_PERIOD: z.coerce.number().int().min(10).max(86_400).default(300),
  NODE_ENV: z.string().optional(),
  KEY_ENCRYPTION_KEY: keyEncryptionKey.optional(),
  KEY_ENCRYPTION_KEY_PREVIOUS: keyEncryptionKey.optional(),
  DEVELOPMENT_SETUP: z
    .enum(['true', 'false'])
    .default('false')
    .transform((v) => v === 'true'),
  SIGNING_KEY_ROTATION_DAYS: z.coerce.number().positive().max(3650).default(90),
  JWKS_CACHE_SECONDS: z.coerce.number().int().min(0).max(86400).default(300),
  // Connections (issue 28 §2): no socket is held for ever by a client that stalls.
  HTTP_HEADERS_TIMEOUT: z.coerce.number().int().min(1).max(300).default(10),
  HTTP_REQUEST_TIMEOUT: z.coerce.number().int().min(1).max(600).default(30),
  HTTP_KEEP_ALIVE_TIMEOUT: z.coerce.number().int().min(1).max(3600).default(65),
  HTTP_MAX_REQUESTS_PER_SOCKET: z.coerce.number().int().min(0).max(1_000_000).default(1000),
  HTTP_MAX_CONNECTIONS: z.coerce.number().int().min(1).max(1_000_000).default(4096),
  ICON_STORAGE_PER_APP: z.coerce
    .number()
    .int()
    .min(65_536)
    .max(1_073_741_824)
    .default(2 * 1024 * 1024),
  ICON_STORAGE_TOTAL: z.coerce
    .number()
    .int()
    .min(65_536)
    .max(68_719_476_736)
    .default(64 * 1024 * 1024),
});

const schema = environmentVariables
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
  // The same for receivers of events (webhooks, Shared Signals push).
  .refine((env) => !(env.EVENTS_ALLOW_LOOPBACK && env.NODE_ENV === 'production'), {
    message: 'is for tests and local receivers only and refused when NODE_ENV=production',
    path: ['EVENTS_ALLOW_LOOPBACK'],
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
        introspectPerClient: env.RATE_LIMIT_INTROSPECT_PER_CLIENT,
        introspectPerIp: env.RATE_LIMIT_INTROSPECT_PER_IP,
        revokePerClient: env.RATE_LIMIT_REVOKE_PER_CLIENT,
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
      events: {
        /** The first retry's delay, doubled at each failure up to an hour, for 72 hours (delivery/schedule.ts). */
        retryBaseSeconds: env.EVENTS_RETRY_BASE_SECONDS,
        /** A receiver failing this long without a success is paused, its backlog kept. */
        pauseAfterSeconds: Math.round(env.EVENTS_PAUSE_AFTER_HOURS * 3600),
        /** Tests and local receivers only: loopback counts as public, and plain http to it is allowed. */
        allowLoopback: env.EVENTS_ALLOW_LOOPBACK,
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
        /** 0: events are never purged. */
        eventRetentionSeconds: env.EVENT_RETENTION_DAYS * 86400,
        deviceRequestRetentionSeconds: 3600,
        unusedIconRetentionSeconds: 3600,
        deliveryRetentionSeconds: env.LINK_RETENTION,
        securityEventTokenRetentionSeconds: 7 * 86400,
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

/**
 * What each environment variable of the schema above means, for docs/configuration.md, which
 * scripts/config-docs.ts writes from this table and the schema: the default and the accepted values
 * come from the schema itself. Nothing here changes what the server accepts. The type makes a
 * variable added to the schema without a line here a compile error, and
 * test/docs/configuration-docs.test.ts fails when the page differs from what the script writes.
 */

export const SECTIONS = {
  server: 'The server',
  database: 'The database',
  keys: 'Keys and secrets',
  admin: 'The admin API and the CLI',
  tokens: 'Codes, tokens and sessions',
  proximity: "The approval page's location checks",
  limits: 'Rate limits and password checks',
  icons: 'Platform icons',
  http: 'Connections',
  housekeeping: 'Housekeeping',
  events: 'Events that leave the server (webhooks, Shared Signals)',
} as const;

export interface VariableDoc {
  section: keyof typeof SECTIONS;
  meaning: string;
  /** Only where the schema cannot say it: a default computed from other variables or from the machine. */
  default?: string;
}

export const VARIABLE_DOCS = {
  PORT: { section: 'server', meaning: 'Listening port' },
  HOST: { section: 'server', meaning: 'Listening address' },
  ISSUER: {
    section: 'server',
    meaning:
      "Public base URL: `iss` of ID tokens, every URL the server hands out. Never taken from the Host header. With `https://`, cookies are `Secure` and every response carries `Strict-Transport-Security: max-age=63072000` (two years); not `includeSubDomains` nor `preload`, which would bind every other host of the operator's domain: add them at the proxy if that is meant.",
    default: '`http://localhost:$PORT`',
  },
  TRUST_PROXY: {
    section: 'server',
    meaning: '`true`, or a comma-separated list of proxy addresses/CIDRs whose `X-Forwarded-For` is believed (client IPs feed rate limits and audit events)',
  },
  LOG_LEVEL: {
    section: 'server',
    meaning:
      'JSON lines on stdout, written synchronously: a reader that stops reading holds the server back (back-pressure), a reader that goes away (`npm start | tee log`, tee killed) only silences the log; the server keeps serving and still stops within 10 s of SIGTERM',
  },
  NODE_ENV: {
    section: 'server',
    meaning: 'The configuration reads it only to refuse `ICON_FETCH_ALLOW_LOOPBACK` and `EVENTS_ALLOW_LOOPBACK` under `production`, which the image sets',
  },
  SERVICE_NAME: { section: 'server', meaning: "The service's name, in every page's title and header (up to 60 characters, no control characters)" },
  SERVICE_LOGO_FILE: {
    section: 'server',
    meaning: "A PNG, JPEG, GIF or WebP file (≤ 256 KB, checked at start) shown in every page's header, served from this server at `/static/logo`",
  },
  SERVICE_LOGO_URL: { section: 'server', meaning: 'Instead, a path on this server (pages load nothing from other hosts)' },
  DATABASE_URL: { section: 'database', meaning: '`postgres://…`; unset means the embedded PGlite database' },
  DATA_DIR: {
    section: 'database',
    meaning: 'Folder of the embedded database; one process opens it at a time (`device-auth.lock` in it names the owner; a lock left by a crash is taken over)',
  },
  MIGRATE_ON_START: { section: 'database', meaning: 'Apply migrations at start (`false` when a deploy step runs `device-auth migrate`)' },
  DATABASE_POOL_SIZE: { section: 'database', meaning: 'PostgreSQL connections per process, besides the one that listens for client changes' },
  DATABASE_PREPARED_STATEMENTS: {
    section: 'database',
    meaning:
      'Named prepared statements on PostgreSQL (parsed and planned once per connection); `false` behind a pooler that cannot carry them, such as PgBouncer in transaction mode before 1.21',
  },
  REDIS_URL: {
    section: 'database',
    meaning:
      '`redis://…`: keep rate limit counters (and used DPoP proofs) in Redis instead of the database. Every call is bounded to 500 ms without an offline queue: while Redis is away, requests that need it get `503` with `Retry-After`, `/readyz` answers 503 `redis unreachable`, and the client reconnects by itself',
  },
  KEY_ENCRYPTION_KEY: {
    section: 'keys',
    meaning:
      '32 bytes in base64 or base64url (`openssl rand -base64 32`) that seal private keys and server secrets at rest. Required with `DATABASE_URL` (unless `DEVELOPMENT_SETUP=true`); embedded without it: a generated `DATA_DIR/key-encryption-key` (0600). See operations.md, "Key-encryption key"',
  },
  KEY_ENCRYPTION_KEY_PREVIOUS: {
    section: 'keys',
    meaning: 'During a KEK rotation: the old key, still accepted for opening until `device-auth keys rewrap` has re-sealed everything',
  },
  DEVELOPMENT_SETUP: {
    section: 'keys',
    meaning: '`true`: PostgreSQL without `KEY_ENCRYPTION_KEY` is allowed, with a generated key file in `DATA_DIR` (one machine only)',
  },
  SIGNING_KEY_ROTATION_DAYS: { section: 'keys', meaning: 'How long a signing key signs before the next one takes over' },
  JWKS_CACHE_SECONDS: {
    section: 'keys',
    meaning: '`Cache-Control: max-age` of `/.well-known/jwks.json`; a new key is published at least this long (+ 60 s) before it signs',
  },
  METRICS_TOKEN: {
    section: 'keys',
    meaning: 'Bearer secret (≥ 16 characters) a scraper must present at `GET /metrics`; while unset, `/metrics` does not exist',
  },
  ADMIN_TOKEN: {
    section: 'admin',
    meaning:
      'Bearer secret (32–512 printable characters, e.g. `openssl rand -hex 32`) of the admin API. Needed for its TCP port; when set, the socket asks for it too',
  },
  ADMIN_SOCKET: {
    section: 'admin',
    meaning: 'Unix socket of the admin API, created owner-only (0600); `off` for none',
    default: '`$DATA_DIR/admin.sock` on the embedded database; none on PostgreSQL',
  },
  ADMIN_HOST: {
    section: 'admin',
    meaning: "Address of the admin API's TCP listener (`0.0.0.0` inside a container, whose loopback is its own); never the public port",
  },
  ADMIN_PORT: { section: 'admin', meaning: "Port of the admin API's TCP listener; only with `ADMIN_TOKEN` (the process refuses to start otherwise)" },
  ADMIN_URL: { section: 'admin', meaning: 'For the CLI: the admin API of a running server elsewhere (`http://127.0.0.1:9000`); sent with `ADMIN_TOKEN`' },
  DEVICE_CODE_TTL: { section: 'tokens', meaning: 'Lifetime of device and user codes' },
  DEVICE_POLL_INTERVAL: { section: 'tokens', meaning: 'Minimum seconds between polls; each `slow_down` adds 5' },
  ACCESS_TOKEN_TTL: { section: 'tokens', meaning: 'Access token lifetime' },
  ID_TOKEN_TTL: { section: 'tokens', meaning: 'ID token lifetime; also how long a retired signing key stays published' },
  REFRESH_TOKEN_TTL: { section: 'tokens', meaning: 'Refresh token lifetime (60 days)' },
  REFRESH_RETRY_WINDOW: {
    section: 'tokens',
    meaning:
      'Seconds after a rotation during which the previous refresh token, while its successor is unused, gets the same answer again; 0–300, 0 turns retries off (endpoints.md, "Tokens")',
  },
  SESSION_TTL: { section: 'tokens', meaning: 'Browser session lifetime on the account pages; also the lifetime of the anonymous cookie before sign-in' },
  DPOP_PROOF_WINDOW: {
    section: 'tokens',
    meaning: "Seconds a DPoP proof's `iat` may be before or after the server's clock (5-600); a used proof is remembered twice this long",
  },
  DPOP_NONCES: {
    section: 'tokens',
    meaning: '`true`: every DPoP proof must carry a server nonce (RFC 9449 §8, §9), answered with `use_dpop_nonce` and a `DPoP-Nonce` header otherwise',
  },
  DPOP_NONCE_PERIOD: { section: 'tokens', meaning: 'Seconds per nonce: a nonce is accepted in its period and the next' },
  PROXIMITY_POLICY_COUNTRY_MISMATCH: {
    section: 'proximity',
    meaning:
      'What the approval page does when the request came from another country than the approver is in: `allow` (nothing), `warn` (a prominent warning), `confirm` (the warning and a checkbox "I am setting up a device that is in front of me" before Approve counts), `deny` (the request is refused with a clear page; the device hears `access_denied`)',
  },
  PROXIMITY_POLICY_HOSTING_NETWORK: {
    section: 'proximity',
    meaning: 'The same, for a request from a hosting or datacenter network (where phishing requests mostly come from)',
  },
  PROXIMITY_POLICY_UNKNOWN_LOCATION: {
    section: 'proximity',
    meaning:
      "The same, when either side's place is not known (loopback, private, link-local or reserved addresses, a `TRUST_PROXY` address, or an address the data does not place)",
  },
  PROXIMITY_POLICY_RELAY_NETWORK: {
    section: 'proximity',
    meaning:
      'The same, for a request from a relay, VPN or CDN egress network (`src/geo/relay-networks.ts`: Cloudflare WARP, iCloud Private Relay, Zscaler, …), where strangers share one AS and even one address',
  },
  PROXIMITY_POLICY_REDEEMER_MISMATCH: {
    section: 'proximity',
    meaning:
      'The poll that collects the tokens, from another country, AS or hosting class than the request: `allow`, `warn` (recorded on the grant, a line on the Devices page) or `deny` (`access_denied` for this and every later poll, no grant). The other signals are judged at that poll too, under their own policies (`confirm` counts as `warn` there)',
  },
  PROXIMITY_SAME_NETWORK_IPV6_PREFIX: {
    section: 'proximity',
    meaning: 'Two IPv6 addresses in one prefix of this length (32-128) are "the same network" on the approval page',
  },
  GEOIP_DATABASE: {
    section: 'proximity',
    meaning:
      'Path of a MaxMind GeoIP2 or GeoLite2 **City** database (`.mmdb`) for city names; country and network come from the shipped data without it. A missing or unreadable file, or one that is not a City database, stops the start with one line',
  },
  RATE_LIMIT_USER_CODE_PER_USER: {
    section: 'limits',
    meaning: 'Wrong user codes per signed-in user, on the code step and the approval form alike (`MAX/SECONDS`, or `off`)',
  },
  RATE_LIMIT_USER_CODE_PER_IP: { section: 'limits', meaning: 'Wrong user codes per client address' },
  RATE_LIMIT_SIGNIN_PER_ACCOUNT_IP: {
    section: 'limits',
    meaning: 'Failed sign-ins on one account from one address; past it that address is refused (429) on that account',
  },
  RATE_LIMIT_SIGNIN_PER_IP: { section: 'limits', meaning: 'Failed sign-ins per client address, across accounts' },
  RATE_LIMIT_SIGNIN_PER_ACCOUNT: {
    section: 'limits',
    meaning:
      'Failed sign-ins per account from all addresses; past it an address that already failed on the account is refused, and any other is slowed by `SIGNIN_SLOWDOWN_MS`, never refused: nobody can lock the owner out',
  },
  SIGNIN_SLOWDOWN_MS: { section: 'limits', meaning: 'The delay above' },
  PASSWORD_CHECKS_RUNNING: { section: 'limits', meaning: 'Password verifications (argon2id) running at once', default: 'the number of cores' },
  PASSWORD_CHECKS_QUEUED: {
    section: 'limits',
    meaning:
      'Verifications waiting for a place; past it a sign-in is answered 503 with `Retry-After: 1` at once, unless it is lighter than the heaviest waiting one (shared fairly across networks; recent successes first: docs/security.md)',
  },
  PASSWORD_CHECKS_PER_IP: {
    section: 'limits',
    meaning: "Verifications running or waiting from one address; past it 503 at once, so a flood from one address never delays another's sign-in",
  },
  RATE_LIMIT_DEVICE_CODE_PER_CLIENT: {
    section: 'limits',
    meaning: 'Device code requests per app; a request refused anyway (scope, platform fields, unknown app) is never counted',
  },
  RATE_LIMIT_DEVICE_CODE_PER_IP: { section: 'limits', meaning: 'Device code requests per client address, counted before the per-app budget' },
  RATE_LIMIT_TOKEN_PER_CLIENT: {
    section: 'limits',
    meaning: 'Token endpoint requests per app; a request refused anyway (malformed, unsupported or unregistered grant type, unknown app) is never counted',
  },
  RATE_LIMIT_NETWORK_SHARE: {
    section: 'limits',
    meaning:
      "Once an app's budget is spent, each network (IPv4 address and /24; IPv6 /64, /56, /48) may still use this fraction of it (at least 1) in the window: the heaviest senders are refused, a device at a normal rate keeps its answers (docs/security.md)",
  },
  RATE_LIMIT_TOKEN_PER_IP: {
    section: 'limits',
    meaning: "Token endpoint requests per client address, counted before the per-app budget: one address can never use up what an app's devices share",
  },
  RATE_LIMIT_USERINFO_PER_IP: { section: 'limits', meaning: 'Userinfo requests per client address, counted before the token or its proof is looked at' },
  RATE_LIMIT_INTROSPECT_PER_CLIENT: {
    section: 'limits',
    meaning:
      'Introspection requests per app (the resource server asking), counted after the per-address limit and only for an app that may introspect; past it the heaviest networks are refused, as at the token endpoint',
  },
  RATE_LIMIT_INTROSPECT_PER_IP: {
    section: 'limits',
    meaning: 'Introspection requests per client address (a resource server introspecting more than 200 a second should cache answers, or raise this)',
  },
  RATE_LIMIT_REVOKE_PER_CLIENT: {
    section: 'limits',
    meaning:
      'Revocation requests per app, shared by its devices; counted after the per-address limit and only once the app is authenticated; past it the heaviest networks are refused, a device signing out from a network of its own is not',
  },
  RATE_LIMIT_REVOKE_PER_IP: { section: 'limits', meaning: 'Revocation requests per client address, counted before the per-app budget' },
  RATE_LIMIT_IPV6_PREFIX: {
    section: 'limits',
    meaning: "Every per-address limit counts an IPv6 client by this prefix (one customer's network), an IPv4 client by its address",
  },
  ICON_FETCH_CONCURRENCY: { section: 'icons', meaning: 'Platform icons fetched at once; a code request that finds them all busy gets no icon' },
  ICON_STORAGE_PER_APP: {
    section: 'icons',
    meaning:
      "Bytes of stored platform icons one app's requests may hold; past it a request gets its code without an icon. An icon is kept only while a pending or approved request or a live grant shows it",
  },
  ICON_STORAGE_TOTAL: { section: 'icons', meaning: 'Bytes of stored platform icons of all apps together' },
  ICON_FETCH_ALLOW_LOOPBACK: {
    section: 'icons',
    meaning:
      "**For tests only**: loopback addresses count as public, so a test's icon server on 127.0.0.1 can stand for the Internet. The process refuses to start with it when `NODE_ENV=production`, and logs a warning whenever it is on",
  },
  HTTP_HEADERS_TIMEOUT: { section: 'http', meaning: "A request's headers must all arrive within this many seconds, else 408 and the socket closes" },
  HTTP_REQUEST_TIMEOUT: {
    section: 'http',
    meaning:
      'The whole request, body included, within this many seconds (a client that sends headers and then stalls is cut off); at least `HTTP_HEADERS_TIMEOUT`',
  },
  HTTP_KEEP_ALIVE_TIMEOUT: {
    section: 'http',
    meaning: 'An idle keep-alive connection is closed after this long; keep it above the idle timeout of a load balancer in front',
  },
  HTTP_MAX_REQUESTS_PER_SOCKET: { section: 'http', meaning: 'A keep-alive connection is closed after this many requests (`0`: never)' },
  HTTP_MAX_CONNECTIONS: {
    section: 'http',
    meaning: "Open connections on the public port; past it a new one is closed at once. Keep it well below the process's descriptor limit (`ulimit -n`)",
  },
  PURGE_INTERVAL: { section: 'housekeeping', meaning: 'Seconds between purges of expired state (`0`: never; `device-auth purge` runs one)' },
  PURGE_BATCH_SIZE: { section: 'housekeeping', meaning: 'Rows per purge statement' },
  LINK_RETENTION: {
    section: 'housekeeping',
    meaning:
      'How long an ended grant is kept, in seconds (30 days); its events are kept for `EVENT_RETENTION_DAYS`; also how long a delivered or given-up webhook message stays in the delivery log',
  },
  EVENT_RETENTION_DAYS: {
    section: 'housekeeping',
    meaning:
      'Days every event of the event log is kept, that of a deleted user or app included (by id, never by email); then the purge removes it (`0`: never)',
  },
  EVENTS_RETRY_BASE_SECONDS: {
    section: 'events',
    meaning:
      'Seconds before a failed delivery is tried again; each failure doubles it, up to an hour between attempts, for 72 hours of attempts (time paused does not count); then the message is given up',
  },
  EVENTS_PAUSE_AFTER_HOURS: {
    section: 'events',
    meaning:
      'A receiver that has failed every attempt for this many hours (at most 71) is paused: nothing more is sent and its backlog is kept until it is resumed (`device-auth webhooks resume ID`)',
  },
  EVENTS_ALLOW_LOOPBACK: {
    section: 'events',
    meaning:
      '**For tests and local receivers only**: webhook and Shared Signals receivers on loopback are allowed, over plain http too (every other receiver must be https on a public address). Refused when `NODE_ENV=production`; a warning is logged whenever it is on',
  },
} satisfies Record<keyof typeof environmentVariables.shape, VariableDoc>;
