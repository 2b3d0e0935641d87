import { isIP } from 'node:net';
import type { FastifyInstance } from 'fastify';
import pino from 'pino';
import { buildApp } from '../../src/app.js';
import { loadConfig, type Config } from '../../src/config.js';
import { createDeps } from '../../src/compose.js';
import type { Deps } from '../../src/deps.js';
import { ManualClock } from '../../src/lib/clock.js';
import { loggerOptions } from '../../src/lib/logging.js';
import { createClient } from '../../src/apps/registration.js';
import { createUser } from '../../src/accounts/users.js';
import type { HostResolver } from '../../src/lib/outbound-address.js';
import { createTestDatabase, type TestDatabase } from './database.js';

export interface TestApp {
  app: FastifyInstance;
  deps: Deps;
  clock: ManualClock;
  config: Config;
  database: TestDatabase;
  close(): Promise<void>;
}

/** Real time plus whatever the test has skipped ahead: for clients that really wait. */
class RealTimeClock extends ManualClock {
  #offsetMs = 0;
  override now(): Date {
    return new Date(Date.now() + this.#offsetMs);
  }
  override advance(seconds: number): void {
    this.#offsetMs += seconds * 1000;
  }
}

export interface TestAppOptions {
  env?: Record<string, string>;
  /** Let time pass for real (a child process that sleeps between polls). */
  realTime?: boolean;
  /** Receives the server's JSON log lines at trace level, as production would write them. */
  logSink?: (line: string) => void;
  /** Reuse a database (several instances on one database); it is not dropped by close(). */
  database?: TestDatabase;
  /** How the icon fetcher finds hosts and whom it trusts; by default it finds none (below). */
  iconFetching?: { resolve?: HostResolver; extraCertificates?: readonly string[] };
  /** How deliveries of events (webhooks, Shared Signals push) find hosts; by default IP literals only (below). */
  outbound?: { resolve?: HostResolver; extraCertificates?: readonly string[] };
}

/**
 * Tests send icon URLs of hosts that do not exist, and must never reach the network: without an
 * icon server of their own (helpers/icon-server.ts), no host name or address is resolved.
 */
const resolveNothing: HostResolver = async (hostname) => {
  throw Object.assign(new Error(`no name resolution in tests: ${hostname}`), { code: 'ENOTFOUND' });
};

/** Receivers in tests listen on 127.0.0.1: an address stands for itself, and no name is resolved. */
export const resolveLiteralsOnly: HostResolver = async (hostname) => {
  const family = isIP(hostname);
  if (family !== 0) return [{ address: hostname, family }];
  throw Object.assign(new Error(`no name resolution in tests: ${hostname}`), { code: 'ENOTFOUND' });
};

/**
 * The key-encryption key of every test app, server process and CLI run: instances that share a
 * database must share it, as in production. Fixed, so a test can start a second instance later.
 */
export const TEST_KEY_ENCRYPTION_KEY = Buffer.alloc(32, 7).toString('base64');

/** The whole application on a fresh database, with a clock the test moves by hand. */
export async function startTestApp(options: TestAppOptions = {}): Promise<TestApp> {
  const database = options.database ?? (await createTestDatabase());
  const config = loadConfig({
    ISSUER: 'http://localhost:3000',
    LOG_LEVEL: 'silent',
    KEY_ENCRYPTION_KEY: TEST_KEY_ENCRYPTION_KEY,
    ...NO_RATE_LIMITS,
    ...options.env,
  });
  const clock = options.realTime ? new RealTimeClock() : new ManualClock();
  const log = options.logSink ? pino(loggerOptions('trace'), { write: (line: string) => options.logSink?.(line) }) : pino({ level: 'silent' });
  const deps = await createDeps({
    database: database.handle,
    config,
    log,
    clock,
    iconFetching: { resolve: resolveNothing, ...options.iconFetching },
    outbound: { resolve: resolveLiteralsOnly, ...options.outbound },
  });
  const app = await buildApp(deps, { logger: options.logSink ? log : false });
  await app.ready();
  return {
    app,
    deps,
    clock,
    config,
    database,
    async close() {
      await app.close();
      await deps.close();
      if (!options.database) await database.drop();
    },
  };
}

/**
 * Tests send everything from one address in quick succession; limits are switched off unless a
 * test names the ones it is about.
 */
export const NO_RATE_LIMITS: Record<string, string> = {
  RATE_LIMIT_USER_CODE_PER_USER: 'off',
  RATE_LIMIT_USER_CODE_PER_IP: 'off',
  RATE_LIMIT_SIGNIN_PER_ACCOUNT_IP: 'off',
  RATE_LIMIT_SIGNIN_PER_ACCOUNT: 'off',
  RATE_LIMIT_SIGNIN_PER_IP: 'off',
  RATE_LIMIT_DEVICE_CODE_PER_CLIENT: 'off',
  RATE_LIMIT_DEVICE_CODE_PER_IP: 'off',
  RATE_LIMIT_TOKEN_PER_CLIENT: 'off',
  RATE_LIMIT_TOKEN_PER_IP: 'off',
  RATE_LIMIT_USERINFO_PER_IP: 'off',
  RATE_LIMIT_INTROSPECT_PER_CLIENT: 'off',
  RATE_LIMIT_INTROSPECT_PER_IP: 'off',
  RATE_LIMIT_REVOKE_PER_CLIENT: 'off',
  RATE_LIMIT_REVOKE_PER_IP: 'off',
};

export const PASSWORD = 'correct horse battery staple';

/** Anything with a database to seed: a TestApp, or `{ deps: { db } }` for a database a server process uses. */
export type Seedable = { deps: Pick<Deps, 'db'> };

export async function seedUser(t: Seedable, email = `user-${Math.random().toString(36).slice(2)}@example.test`) {
  const { user_id } = await createUser(t.deps.db, { email, password: PASSWORD, name: 'Test User' });
  return { userId: user_id, email, password: PASSWORD };
}

export async function seedClient(
  t: Seedable,
  options: {
    kind?: 'tv' | 'bot' | 'web';
    type?: 'public' | 'confidential';
    scopes?: string[];
    name?: string;
    introspection?: boolean;
    grantTypes?: string[];
    redirectUris?: string[];
    postLogoutRedirectUris?: string[];
    dpopBoundAccessTokens?: boolean;
    confirmationPhrase?: boolean;
  } = {},
) {
  const created = await createClient(t.deps.db, {
    name: options.name ?? 'Living Room TV',
    kind: options.kind ?? 'tv',
    type: options.type ?? 'public',
    scopes: options.scopes ?? ['openid', 'profile', 'email', 'offline_access'],
    // Tests' confidential web apps stand for resource servers, registered as one explicitly (the server's default is off).
    introspection: options.introspection ?? (options.kind === 'web' && options.type === 'confidential'),
    grant_types: options.grantTypes,
    redirect_uris: options.redirectUris,
    post_logout_redirect_uris: options.postLogoutRedirectUris,
    dpop_bound_access_tokens: options.dpopBoundAccessTokens,
    confirmation_phrase: options.confirmationPhrase,
  });
  return { clientId: created.client_id, clientSecret: created.client_secret };
}

export function basicAuth(clientId: string, secret: string): string {
  // RFC 6749 §2.3.1: both parts are form-urlencoded before being joined.
  return `Basic ${Buffer.from(`${encodeURIComponent(clientId)}:${encodeURIComponent(secret)}`).toString('base64')}`;
}

/** Form-encodes a body for app.inject. */
export function form(fields: Record<string, string | string[] | undefined>): string {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(fields)) {
    if (value === undefined) continue;
    for (const v of Array.isArray(value) ? value : [value]) params.append(key, v);
  }
  return params.toString();
}

export const FORM = { 'content-type': 'application/x-www-form-urlencoded' } as const;

/**
 * Runs `change` (something that changes a client's row) and returns its result once `t` has heard
 * of it where it caches clients (PostgreSQL's LISTEN): "the next request" is the one after the
 * announcement, which arrives a moment after the commit. `announced(result)` says whether the
 * change wrote anything; a refused one is announced to nobody.
 */
export async function afterAnnounced<T>(
  t: { deps: Pick<Deps, 'clients'> },
  change: () => Promise<T>,
  announced: (result: T) => boolean = () => true,
): Promise<T> {
  const { clients } = t.deps;
  const heardBefore = clients.announcementsHeard;
  const result = await change();
  if (!announced(result)) return result;
  const changed = Date.now();
  for (let turn = 0; turn < 100_000 && clients.listening && clients.announcementsHeard === heardBefore; turn++) {
    if (Date.now() - changed > 5_000) throw new Error('the client change was not announced within 5 s');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  return result;
}
