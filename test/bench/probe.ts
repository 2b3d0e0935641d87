/**
 * `npm run bench:probe -- MODE --kind KIND --checkout DIR --database-url URL`: the two
 * measurements that located the hot paths' costs when `npm run bench` could only say "slower"
 * (docs/benchmarks.md, 2026-11-27). Both run one request or statement at a time, so the machine's
 * drift moves them far less than a benchmark under load; compare checkouts run after run, in turns.
 *
 * - `server`: the server's own CPU per request, without the database. The checkout's production
 *   build (`dist/`) is started in this process, its hot statement for KIND is answered from
 *   memory (matched in pg's `Client.query`; every other statement goes to the database), and
 *   `--requests` requests (15,000) go through `app.inject` after a warm-up. Prints this process's
 *   CPU per request and how many statements per request still reached the database (0 for a
 *   pure measurement). Pin it: `taskset -c 0 npm run bench:probe -- server …` pins npm too, so
 *   rather `taskset -c 0 node --import tsx test/bench/probe.ts server …`.
 *   `--through socket` puts a real listener in front instead of `app.inject`: test/bench/load.ts,
 *   pinned to the other core, keeps 64 keep-alive connections busy for `--seconds` (10) after a
 *   3 s warm-up, and the CPU per request is this process's over the load's measured window. Under
 *   load a request costs what the socket, the parser and fewer requests per event-loop turn add,
 *   which `app.inject` leaves out (docs/benchmarks.md, 2026-11-27 (noon)). Runs of 6 s still carry
 *   the JIT's warm-up; give 15-20 s. `--hot-statement database` sends the hot statement to the
 *   database like every other (seed at least 30,000 rows: the load cycles through that many codes),
 *   for what a real exchange with PostgreSQL costs the server (the pool, its timers, the result's
 *   parsing).
 * - `statement`: the hot statement alone in PostgreSQL: one connection, its backend pinned to
 *   core 0 (run the probe on core 1), `--requests` executions (5,000) after a warm-up; prints the
 *   backend's CPU (from /proc, 10 ms ticks: keep thousands of executions) and the WAL per
 *   execution. `code` inserts device requests; `refresh` rotates the seeded grants 0..N-1 once, so a
 *   database serves one refresh run (make a copy per run: CREATE DATABASE … TEMPLATE …).
 *
 * KIND: code | poll | refresh | introspect | userinfo (`statement` takes code and refresh). DIR is a built checkout
 * (default: this one), URL a database that DIR's migrations and seed prepared:
 *   node --import tsx test/bench/ab-prepare.ts DIR URL 20000 8
 * `--statement-checkout DIR2` runs DIR2's statement against DIR's schema (statement mode), to
 * split a statement's cost from its schema's, where the schema still has every table and column
 * that statement names (fea2e3b's code request on main's schema does; its refresh, which wrote
 * grant_events, does not).
 */
import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { basicAuthorization, benchToken, OPENID_SCOPES, PLAIN_SCOPES, RS_CLIENT_ID, RS_CLIENT_SECRET, TV_CLIENT_ID } from './fixtures.js';
import { LOAD_CORE, ROOT, runToEnd, SERVER_CORE, spawnChild, TASKSET } from './processes.js';
import type { LoadResult, LoadSpec } from './scenarios.js';
import { childEnv, REQUEST_TIMEOUT_MS } from './server-env.js';

type Kind = 'code' | 'poll' | 'refresh' | 'introspect' | 'userinfo';
const KIND_NAMES: readonly Kind[] = ['code', 'poll', 'refresh', 'introspect', 'userinfo'];
interface ProbeOptions {
  mode: 'server' | 'statement';
  kind: Kind;
  checkout: string;
  statementCheckout: string;
  databaseUrl: string;
  requests: number;
  /** server: `inject` (no socket) or `socket` (a real listener, load from test/bench/load.ts on the other core). */
  through: 'inject' | 'socket';
  seconds: number;
  /** socket: the measured window opens at this wall-clock time (Date.now()), so that two probes run at once measure the same seconds; 0 for after the warm-up. */
  measureFrom: number;
  /** server: the hot statement answered from memory (`memory`, the default) or sent to the database like every other. */
  hotStatement: 'memory' | 'database';
}

const USAGE =
  'usage: probe.ts server|statement --kind code|poll|refresh|introspect|userinfo --database-url URL [--checkout DIR] [--statement-checkout DIR] [--requests N] [--through inject|socket] [--seconds N] [--measure-from EPOCH_MS] [--hot-statement memory|database]';

function parseProbeOptions(argv: string[]): ProbeOptions {
  const [mode, ...rest] = argv;
  if (mode !== 'server' && mode !== 'statement') throw new Error(USAGE);
  const options: ProbeOptions = {
    mode,
    kind: 'code',
    checkout: ROOT,
    statementCheckout: '',
    databaseUrl: '',
    requests: mode === 'server' ? 15_000 : 5_000,
    through: 'inject',
    seconds: 10,
    measureFrom: 0,
    hotStatement: 'memory',
  };
  for (let i = 0; i < rest.length; i += 2) {
    const [flag, value = ''] = [rest[i], rest[i + 1]];
    if (flag === '--kind' && KIND_NAMES.includes(value as Kind)) options.kind = value as Kind;
    else if (flag === '--checkout') options.checkout = path.resolve(value);
    else if (flag === '--statement-checkout') options.statementCheckout = path.resolve(value);
    else if (flag === '--database-url') options.databaseUrl = value;
    else if (flag === '--through' && (value === 'inject' || value === 'socket')) options.through = value;
    else if (flag === '--seconds' && /^[1-9][0-9]?$/.test(value)) options.seconds = Number(value);
    else if (flag === '--hot-statement' && (value === 'memory' || value === 'database')) options.hotStatement = value;
    else if (flag === '--measure-from' && /^[1-9][0-9]{12}$/.test(value)) options.measureFrom = Number(value);
    else if (flag === '--requests' && /^[1-9][0-9]{2,6}$/.test(value)) options.requests = Number(value);
    else throw new Error(`${flag ?? ''} ${value}: ${USAGE}`);
  }
  if (!options.databaseUrl) throw new Error(USAGE);
  if (mode === 'statement' && options.kind !== 'code' && options.kind !== 'refresh') throw new Error('statement takes --kind code or refresh');
  options.statementCheckout ||= options.checkout;
  return options;
}

// Modules of another checkout, loaded by path: their types are not this checkout's.
type AnyModule = any;
const load = (checkout: string, file: string): Promise<AnyModule> => import(pathToFileURL(path.join(checkout, file)).href);

const FORM = { 'content-type': 'application/x-www-form-urlencoded' };
const DEVICE_GRANT = 'urn:ietf:params:oauth:grant-type:device_code';

/** What each kind sends, and how its hot statement is recognised and answered from memory. */
interface KindProbe {
  method?: 'GET' | 'POST';
  url: string;
  /** Headers besides the form's content type. */
  headers?: Record<string, string>;
  payload: string;
  expected: number;
  matches: (sql: string) => boolean;
  row: () => Record<string, unknown>;
}

/** A live access token's row as the read paths' statements return it. */
const liveToken = () => ({
  scopes: OPENID_SCOPES,
  created_at: new Date(),
  expires_at: new Date(Date.now() + 3_600_000),
  grant_id: '00000000-0000-4000-8000-000000000005',
  user_id: '00000000-0000-4000-8000-000000000006',
  client_id: TV_CLIENT_ID,
  dpop_jkt: null,
});

const KINDS: Record<Kind, KindProbe> = {
  code: {
    url: '/oauth/device/code',
    payload: `client_id=${TV_CLIENT_ID}&scope=openid%20profile%20email%20offline_access&platform_name=Bench%20TV`,
    expected: 200,
    matches: (sql) => sql.includes('INSERT INTO device_requests'),
    row: () => ({ request_id: '00000000-0000-4000-8000-000000000001' }),
  },
  poll: {
    url: '/oauth/token',
    payload: `grant_type=${encodeURIComponent(DEVICE_GRANT)}&client_id=${TV_CLIENT_ID}&device_code=${benchToken('deviceCode', 0)}`,
    expected: 400,
    matches: (sql) => sql.includes('UPDATE device_requests d') && sql.includes('last_polled_at'),
    row: () => ({
      request_id: '00000000-0000-4000-8000-000000000002',
      client_disabled: false,
      status: 'pending',
      denied_reason: null,
      expired: false,
      throttled: false,
      interval_seconds: 1,
      requester_ip: '127.0.0.1',
      approver_ip: null,
    }),
  },
  refresh: {
    url: '/oauth/token',
    payload: `grant_type=refresh_token&client_id=${TV_CLIENT_ID}&refresh_token=${benchToken('refreshToken', 1)}`,
    expected: 200,
    matches: (sql) => sql.includes('UPDATE grants g') && sql.includes('INSERT INTO refresh_tokens'),
    row: () => ({
      grant_id: '00000000-0000-4000-8000-000000000003',
      client_id: TV_CLIENT_ID,
      user_id: '00000000-0000-4000-8000-000000000004',
      replaced: false,
      expired: false,
      live: true,
      client_disabled: false,
      scope_ok: true,
      key_ok: true,
      // Without openid: an ID token's RSA signature would be most of what is measured.
      scopes: PLAIN_SCOPES,
      auth_time: new Date(),
      email: 'probe@example.test',
      name: 'Probe',
      rotated: true,
      previous_ip: '127.0.0.1',
      approver_ip: null,
    }),
  },
  introspect: {
    url: '/oauth/introspect',
    headers: { authorization: basicAuthorization(RS_CLIENT_ID, RS_CLIENT_SECRET) },
    payload: `token=${benchToken('accessToken', 3)}`,
    expected: 200,
    matches: (sql) => sql.includes('AS caller_enabled'),
    row: () => ({ caller_enabled: true, ...liveToken() }),
  },
  userinfo: {
    method: 'GET',
    url: '/oauth/userinfo',
    headers: { authorization: `Bearer ${benchToken('accessToken', 3)}` },
    payload: '',
    expected: 200,
    matches: (sql) => sql.includes('u.email, u.name'),
    row: () => ({ ...liveToken(), email: 'probe@example.test', name: 'Probe' }),
  },
};

/**
 * The server's settings under load (server-env.ts, as the benchmarks run it), in this process.
 * NODE_OPTIONS, the image's heap cap, applies only to a process being started, so it is left out.
 */
async function serverEnvironment(options: ProbeOptions): Promise<void> {
  const { SERVER_SETTINGS } = await import('./server-env.js');
  const { NODE_OPTIONS: _, ...settings } = SERVER_SETTINGS;
  Object.assign(process.env, {
    ...settings,
    DATABASE_URL: options.databaseUrl,
    NODE_ENV: 'production',
    // One key for every run on a database: its secrets are sealed under the first run's.
    KEY_ENCRYPTION_KEY: process.env.KEY_ENCRYPTION_KEY ?? createHash('sha256').update('device-auth-bench:probe').digest('base64'),
    ISSUER: 'http://127.0.0.1:3000',
  });
}

async function probeServer(options: ProbeOptions): Promise<void> {
  const kind = KINDS[options.kind];
  await serverEnvironment(options);
  const pg = (await load(options.checkout, 'node_modules/pg/lib/index.js')).default;
  const query = pg.Client.prototype.query;
  let toDatabase = 0;
  let answered = 0;
  pg.Client.prototype.query = function (this: unknown, config: AnyModule, values: AnyModule, callback: AnyModule) {
    const text: unknown = typeof config === 'string' ? config : config?.text;
    if (options.hotStatement === 'memory' && typeof text === 'string' && kind.matches(text)) {
      answered++;
      const result = { rows: [kind.row()], rowCount: 1, command: 'SELECT', fields: [] };
      const done = [config?.callback, values, callback].find((f) => typeof f === 'function');
      if (done) {
        process.nextTick(() => done(null, result));
        return undefined;
      }
      return Promise.resolve(result);
    }
    toDatabase++;
    return query.call(this, config, values, callback);
  };
  const config = (await load(options.checkout, 'dist/src/config.js')).loadConfig();
  const { connectDatabase } = await load(options.checkout, 'dist/src/db/connect.js');
  const { buildApp } = await load(options.checkout, 'dist/src/app.js');
  const composition = await load(options.checkout, 'dist/src/compose.js').catch(() => load(options.checkout, 'dist/src/deps.js'));
  const { systemClock } = await load(options.checkout, 'dist/src/lib/clock.js');
  const pino = (await load(options.checkout, 'node_modules/pino/pino.js')).default;
  const database = await connectDatabase({
    databaseUrl: options.databaseUrl,
    dataDir: 'unused',
    poolSize: 4,
    preparedStatements: config.databasePreparedStatements,
  });
  const deps = await composition.createDeps({ database, config, log: pino({ level: 'warn' }), clock: systemClock });
  const app = await buildApp(deps, { logger: false });
  await app.ready();
  const method = kind.method ?? 'POST';
  const headers = { ...(method === 'POST' ? FORM : {}), ...kind.headers };
  const send = () => app.inject({ method, url: kind.url, headers, ...(method === 'POST' ? { payload: kind.payload } : {}), remoteAddress: '127.0.0.1' });
  try {
    const first = await send();
    if (first.statusCode !== kind.expected) throw new Error(`${options.kind}: ${first.statusCode} ${first.body}`);
    for (let i = 0; i < Math.min(3_000, options.requests); i++) await send();
    if (options.through === 'socket') {
      await probeThroughSocket(options, app, () => [toDatabase, answered]);
      return;
    }
    const [databaseBefore, answeredBefore] = [toDatabase, answered];
    const cpu = process.cpuUsage();
    for (let i = 0; i < options.requests; i++) await send();
    const used = process.cpuUsage(cpu);
    const n = options.requests;
    process.stdout.write(
      `${JSON.stringify({
        checkout: options.checkout,
        kind: options.kind,
        requests: n,
        cpuUsPerRequest: Number(((used.user + used.system) / n).toFixed(1)),
        answeredFromMemoryPerRequest: (answered - answeredBefore) / n,
        toDatabasePerRequest: (toDatabase - databaseBefore) / n,
      })}\n`,
    );
  } finally {
    await app.close();
    await deps.close?.();
    await database.close();
  }
}

/**
 * The server in this process behind a real listener, loaded by test/bench/load.ts pinned to the
 * other core (64 keep-alive connections): this process's CPU per request from the load's window
 * marks, the hot statement still answered from memory.
 */
async function probeThroughSocket(options: ProbeOptions, app: AnyModule, counts: () => [number, number]): Promise<void> {
  await app.listen({ host: '127.0.0.1', port: 0 });
  const port = (app.server.address() as { port: number }).port;
  const spec: LoadSpec = {
    label: `probe ${options.kind}`,
    kind: options.kind,
    host: '127.0.0.1',
    port,
    connections: 64,
    warmupMs: 3000,
    warmupLimitMs: 20_000,
    durationMs: options.seconds * 1000,
    maxRequests: 2_000_000,
    timeoutMs: REQUEST_TIMEOUT_MS,
    // The hot statement is answered from memory for any row: enough codes that polls at their interval saturate the server.
    rows: { offset: 0, count: 30_000, stride: 1 },
    grants: 2000,
    refreshGrants: Array.from({ length: 128 }, (_, k) => 2 * k),
    intervalMs: 1000,
    timeline: false,
    ...(options.measureFrom === 0 ? {} : { measureFromEpochMs: options.measureFrom }),
  };
  let start: [NodeJS.CpuUsage, number, number] | null = null;
  let end: [NodeJS.CpuUsage, number, number] | null = null;
  const child = spawnChild('load', LOAD_CORE, ['--import', 'tsx', path.join(ROOT, 'test/bench/load.ts'), JSON.stringify(spec)], childEnv(), (line) => {
    if (line === '@@mark start') start = [process.cpuUsage(), ...counts()];
    else if (line === '@@mark end') end = [process.cpuUsage(), ...counts()];
  });
  const stdout = await runToEnd(child, spec.warmupLimitMs + spec.durationMs + spec.timeoutMs + 60_000);
  const result = JSON.parse(stdout.trim().split('\n').pop() ?? '') as LoadResult;
  if (start === null || end === null) throw new Error('the load marked no window');
  const [[cpu0, db0, mem0], [cpu1, db1, mem1]] = [start as [NodeJS.CpuUsage, number, number], end as [NodeJS.CpuUsage, number, number]];
  const n = result.requests;
  process.stdout.write(
    `${JSON.stringify({
      checkout: options.checkout,
      kind: options.kind,
      through: 'socket',
      requests: n,
      requestsPerSecond: result.requestsPerSecond,
      mix: result.mix,
      // With the load's warm-up (not the inject warm-up's, up to 3,001 more): what a profile of the whole process divides by.
      requestsIncludingWarmUp: Object.values(result.mixAll).reduce((a, b) => a + b, 0),
      cpuUsPerRequest: Number(((cpu1.user + cpu1.system - cpu0.user - cpu0.system) / n).toFixed(1)),
      answeredFromMemoryPerRequest: (mem1 - mem0) / n,
      toDatabasePerRequest: (db1 - db0) / n,
    })}\n`,
  );
}

/** The refresh token hash of seeded grant i (test/bench/seed.ts). */
const seededRefreshHash = (i: number) => createHash('sha256').update(benchToken('refreshToken', i)).digest();

async function probeStatement(options: ProbeOptions): Promise<void> {
  const { connectDatabase } = await load(options.checkout, 'dist/src/db/connect.js');
  const { sql } = await load(options.checkout, 'node_modules/kysely/dist/esm/index.js');
  const handle = await connectDatabase({ databaseUrl: options.databaseUrl, dataDir: 'unused', poolSize: 1 });
  const db = handle.db;
  const backend: number = (await sql`SELECT pg_backend_pid() AS pid`.execute(db)).rows[0].pid;
  if (TASKSET === null) throw new Error('statement pins the backend with taskset (util-linux), which is not installed');
  execFileSync(TASKSET, ['-cp', String(SERVER_CORE), String(backend)], { stdio: 'ignore' });
  const ticks = () => {
    const fields = readFileSync(`/proc/${backend}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
    return Number(fields[11]) + Number(fields[12]);
  };
  const walBytes = async (): Promise<bigint> => BigInt((await sql`SELECT pg_current_wal_lsn() - '0/0' AS bytes`.execute(db)).rows[0].bytes);
  const run = await statementOf(options, db);
  const warmUp = Math.min(300, options.requests);
  try {
    for (let i = 0; i < warmUp; i++) await run(i);
    const [ticks0, wal0] = [ticks(), await walBytes()];
    let applied = 0;
    for (let i = warmUp; i < warmUp + options.requests; i++) if (await run(i)) applied++;
    const [used, wal] = [ticks() - ticks0, (await walBytes()) - wal0];
    const n = options.requests;
    process.stdout.write(
      `${JSON.stringify({
        schema: options.checkout,
        statement: options.statementCheckout,
        kind: options.kind,
        executions: n,
        applied,
        backendCpuUsPerExecution: Number(((used * 10_000) / n).toFixed(1)),
        walBytesPerExecution: Number(wal / BigInt(n)),
      })}\n`,
    );
  } finally {
    await handle.close();
  }
}

/** One execution of the kind's statement for row i; whether it wrote what it exists to write. */
async function statementOf(options: ProbeOptions, db: AnyModule): Promise<(i: number) => Promise<boolean>> {
  const repository = (file: string) => load(options.statementCheckout, `dist/src/repositories/${file}`);
  if (options.kind === 'code') {
    const { insertDeviceRequest } = await repository('device-requests.js');
    return async () =>
      (await insertDeviceRequest(db, {
        device_code_hash: randomBytes(32),
        user_code_hmac: randomBytes(32),
        client_id: TV_CLIENT_ID,
        scopes: OPENID_SCOPES,
        platform_name: 'Bench TV',
        platform_description: null,
        platform_icon: null,
        phrase: 'calm river',
        phrase_choices: ['calm river', 'red fox', 'blue sky'],
        interval_seconds: 5,
        created_at: new Date(),
        expires_at: new Date(Date.now() + 600_000),
        requester_ip: '203.0.113.9',
        requester_user_agent: 'probe',
        dpop_jkt: null,
      })) !== undefined;
  }
  const module = await repository('refresh-tokens.js');
  const rotate =
    module.refreshRotation === undefined
      ? module.rotateRefreshToken
      : module.refreshRotation((await load(options.statementCheckout, 'dist/src/oauth/grant-types/refresh-token.rules.js')).rotationRules);
  return async (i) => {
    const outcome = await rotate(db, {
      presentedHash: seededRefreshHash(i),
      clientId: TV_CLIENT_ID,
      scopes: null,
      refreshHash: randomBytes(32),
      refreshExpiresAt: new Date(Date.now() + 86_400_000),
      accessHash: randomBytes(32),
      accessExpiresAt: new Date(Date.now() + 3_600_000),
      ip: '203.0.113.7',
      dpopJkt: null,
      now: new Date(),
    });
    return outcome?.rotated === true;
  };
}

const options = parseProbeOptions(process.argv.slice(2));
await (options.mode === 'server' ? probeServer(options) : probeStatement(options));
process.exit(0);
