/**
 * `npm run bench`: builds, then measures the built server in production mode on PostgreSQL (and on
 * the embedded database) against two ceilings measured in the same run on the same machine.
 * See docs/benchmarks.md for what it reports and why; `--help` for the options.
 *
 * Processes: the server and the ceilings server on core 0, the load generator on core 1 (taskset),
 * each scenario a fresh load-generator process. PostgreSQL itself is shared and not pinned.
 * Progress goes to stderr, the markdown report to stdout, the JSON to test/bench/results/.
 */
import { randomBytes } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { sql } from 'kysely';
import pg from 'pg';
import { connectDatabase, type DatabaseHandle } from '../../src/db/connect.js';
import { migrateToLatest } from '../../src/db/migrate.js';
import { freePort } from '../helpers/server-process.js';
import { findPostgresBin, startCluster, withDatabase } from './cluster.js';
import { AUTH_CODE_RATE_BOUND, parseOptions, profileOf, type Options, type Profile } from './options.js';
import {
  cpuSecondsOf,
  killAllChildrenNow,
  LOAD_CORE,
  memoryOf,
  pinning,
  ROOT,
  runToEnd,
  SERVER_CORE,
  spawnChild,
  stopAllChildren,
  stopChild,
  waitForHttp,
  type Child,
} from './processes.js';
import { summarizeFile, windowFileOf, type ProfileSummary, type SampleWindow } from './profile-summary.js';
import { renderMarkdown, type DatabaseKind, type MemoryRecord, type RunResults, type ScenarioRecord, type ServerLog, type Verdict } from './report.js';
import type { LoadKind, LoadResult, LoadSpec } from './scenarios.js';
import { seed } from './seed.js';
import { childEnv, IMAGE_NODE_OPTIONS, RAISED_LIMITS, REQUEST_TIMEOUT_MS, SERVER_SETTINGS } from './server-env.js';

const SERVER = path.join(ROOT, 'dist/src/server.js');
const bench = (file: string) => ['--import', 'tsx', path.join(ROOT, 'test/bench', file)];
const log = (line: string) => process.stderr.write(`[bench] ${line}\n`);

// ---------------------------------------------------------------------------------------------
// Cleanup: children stopped (SIGTERM, then SIGKILL), then the database dropped and the temporary
// folders removed, on success, failure, a signal or the hard deadline alike.

const cleanups: Array<() => Promise<void>> = [];
let cleaning: Promise<void> | null = null;
/** Set by a signal or the deadline: what fails after it is the stopping itself, not news. */
let stoppingWith: number | null = null;
let hardDeadline: NodeJS.Timeout | undefined;

function cleanup(): Promise<void> {
  cleaning ??= (async () => {
    await stopAllChildren();
    for (const step of cleanups.reverse()) {
      try {
        await step();
      } catch (error) {
        log(`cleanup step failed: ${error instanceof Error ? error.message : String(error)}`);
      }
    }
  })();
  return cleaning;
}

process.on('exit', killAllChildrenNow);
for (const [signal, code] of [
  ['SIGINT', 130],
  ['SIGTERM', 143],
] as const) {
  process.on(signal, () => {
    log(`${signal}: stopping`);
    stoppingWith = code;
    void cleanup().finally(() => process.exit(code));
  });
}

// ---------------------------------------------------------------------------------------------
// Processes under test.

interface Target {
  database: DatabaseKind;
  /** null with --profile: each scenario starts a server of its own. */
  server: Child | null;
  serverPort: number;
  ceilings: Child | null;
  ceilingsPort: number;
  /** PIDs of this run's PostgreSQL backends; null on the embedded database. */
  dbPids: (() => Promise<number[]>) | null;
  /** PostgreSQL's WAL and checkpoint counters (cluster-wide: this run is the only writer while it measures) and its autovacuum runs. */
  databaseCounters: (() => Promise<DatabaseCounters>) | null;
  /**
   * Runs a checkpoint before a scenario (PostgreSQL). A timed one (checkpoint_timeout, 5 minutes by
   * default) then never falls inside the scenario, which lasts well under that: each page's first
   * change after a checkpoint logs a full image (in one full run, poll at 1,000,000 rows logged
   * 0.06 per poll and kept 0.79 of its 20,000-row rate; 0.98 in the run before). The warm-up
   * absorbs those images instead. The table flags a window in which a checkpoint began anyway, and
   * one in which an autovacuum worker ran: its CPU counts in the scenario's database CPU.
   */
  checkpoint: (() => Promise<void>) | null;
}

interface DatabaseCounters {
  bytes: number;
  fullPageImages: number;
  /** Checkpoints begun (timed or requested): after one, each page's first change logs a full image. */
  checkpoints: number;
  /** Autovacuum and autoanalyze runs finished so far, by table. */
  maintenanceRuns: Record<string, number>;
  /** Tables an autovacuum worker is vacuuming or analysing now. */
  maintaining: string[];
}

/** What the database did in a measured window: WAL per second, checkpoints begun, tables autovacuumed. */
type WalInWindow = Required<NonNullable<ScenarioRecord['wal']>>;

/** The tables an autovacuum worker worked on in a window: runs that finished in it, and any at its ends. */
function maintainedBetween(first: DatabaseCounters, last: DatabaseCounters): string[] {
  const tables = new Set([...first.maintaining, ...last.maintaining]);
  for (const [table, runs] of Object.entries(last.maintenanceRuns)) {
    if (runs > (first.maintenanceRuns[table] ?? 0)) tables.add(table);
  }
  return [...tables].sort();
}

/** The ceilings are served by test/bench/ceilings.ts, every other kind by the server. */
const isCeiling = (kind: LoadKind) => kind === 'form' || kind === 'update';

async function startServer(
  database: { url: string } | { dataDir: string },
  poolSize: number,
  nodeArgs: string[] = [],
  name = 'server',
): Promise<{ child: Child; port: number }> {
  const port = await freePort();
  const env = childEnv({
    ...SERVER_SETTINGS,
    HOST: '127.0.0.1',
    PORT: String(port),
    ISSUER: `http://127.0.0.1:${port}`,
    ...('url' in database ? { DATABASE_URL: database.url, DATABASE_POOL_SIZE: String(poolSize) } : { DATA_DIR: database.dataDir }),
  });
  const child = spawnChild(name, SERVER_CORE, [...nodeArgs, SERVER], env);
  await waitForHttp(child, `http://127.0.0.1:${port}/readyz`, 60_000);
  return { child, port };
}

async function startCeilings(database: { url: string } | { dataDir: string }, poolSize: number): Promise<{ child: Child; port: number }> {
  const port = await freePort();
  const env = childEnv({
    PORT: String(port),
    ...('url' in database ? { DATABASE_URL: database.url, DATABASE_POOL_SIZE: String(poolSize) } : { DATA_DIR: database.dataDir }),
  });
  const child = spawnChild('ceilings', SERVER_CORE, bench('ceilings.ts'), env);
  await waitForHttp(child, `http://127.0.0.1:${port}/healthz`, 60_000);
  return { child, port };
}

// ---------------------------------------------------------------------------------------------
// One scenario: a load-generator process, with CPU read at both ends of its measured window.

interface CpuSample {
  at: number;
  /** The same instant on the monotonic clock that V8 stamps profile samples with, in microseconds. */
  monotonicUs: number;
  process: number | null;
  db: Map<number, number> | null;
  memory: { rssMb: number; peakMb: number } | null;
  database: DatabaseCounters | null;
}

async function sampleCpu(target: Target, pid: number): Promise<CpuSample> {
  const at = performance.now();
  const monotonicUs = Number(process.hrtime.bigint() / 1000n);
  const processCpu = cpuSecondsOf(pid);
  const memory = memoryOf(pid);
  if (!target.dbPids) return { at, monotonicUs, process: processCpu, db: null, memory, database: null };
  const db = new Map<number, number>();
  for (const dbPid of await target.dbPids()) {
    const seconds = cpuSecondsOf(dbPid);
    if (seconds !== null) db.set(dbPid, seconds);
  }
  const database = target.databaseCounters ? await target.databaseCounters() : null;
  return { at, monotonicUs, process: processCpu, db, memory, database };
}

function dbCpuBetween(start: CpuSample, end: CpuSample): number | null {
  if (!start.db || !end.db) return null;
  let total = 0;
  for (const [pid, seconds] of start.db) {
    const later = end.db.get(pid) ?? cpuSecondsOf(pid);
    if (later !== null && later !== undefined) total += later - seconds;
  }
  return total;
}

/** A scenario's record from its run; ratios to the ceilings are filled in per phase (withRatios). */
function recordOf(run: ScenarioRun, about: Pick<ScenarioRecord, 'id' | 'scenario' | 'kind' | 'database' | 'rows'>): ScenarioRecord {
  return {
    ...about,
    result: run.result,
    serverCpu: run.serverCpu,
    dbCpu: run.dbCpu,
    wal: run.wal,
    memory: run.memory,
    vsForm: null,
    vsUpdate: null,
    vsNeighbourUpdates: null,
  };
}

interface ScenarioRun {
  result: LoadResult;
  serverCpu: number | null;
  dbCpu: number | null;
  /** WAL written per second of the measured window, the checkpoints begun in it and the tables autovacuumed in it. */
  wal: WalInWindow | null;
  /** The process under load at the end of the measured window. */
  memory: { rssMb: number; peakMb: number } | null;
  /** performance.now() of the measured window's start, in this process. */
  startedAt: number;
  /** The measured window on the monotonic clock. */
  window: SampleWindow | null;
}

async function runLoad(target: Target, spec: LoadSpec): Promise<ScenarioRun> {
  const underLoad = isCeiling(spec.kind) ? target.ceilings : target.server;
  if (!underLoad) throw new Error(`no process serves ${spec.kind}`);
  const marks: { start?: Promise<CpuSample>; end?: Promise<CpuSample> } = {};
  const child = spawnChild(`load generator (${spec.label})`, LOAD_CORE, [...bench('load.ts'), JSON.stringify(spec)], childEnv(), (line) => {
    if (line === '@@mark start') marks.start = sampleCpu(target, underLoad.pid);
    else if (line === '@@mark end') marks.end = sampleCpu(target, underLoad.pid);
  });
  const stdout = await runToEnd(child, Math.max(spec.warmupMs, spec.warmupLimitMs) + spec.durationMs + spec.timeoutMs + 60_000);
  for (const served of [target.server, target.ceilings]) {
    if (served && served.process.exitCode !== null) throw new Error(`${served.name} exited during ${spec.label}:\n${served.output()}`);
  }
  const result = JSON.parse(stdout.trim().split('\n').pop() ?? '') as LoadResult;
  const first = marks.start ? await marks.start : null;
  const last = marks.end ? await marks.end : null;
  let serverCpu: number | null = null;
  let dbCpu: number | null = null;
  let wal: WalInWindow | null = null;
  if (first && last && last.at > first.at) {
    const wall = (last.at - first.at) / 1000;
    if (first.database && last.database) {
      wal = {
        bytes: (last.database.bytes - first.database.bytes) / wall,
        fullPageImages: (last.database.fullPageImages - first.database.fullPageImages) / wall,
        checkpoints: last.database.checkpoints - first.database.checkpoints,
        autovacuumed: maintainedBetween(first.database, last.database),
      };
    }
    if (first.process !== null && last.process !== null) serverCpu = (last.process - first.process) / wall;
    const db = dbCpuBetween(first, last);
    dbCpu = db === null ? null : db / wall;
  }
  const window = first && last ? { fromUs: first.monotonicUs, toUs: last.monotonicUs } : null;
  return { result, serverCpu, dbCpu, wal, memory: last?.memory ?? null, startedAt: first?.at ?? performance.now(), window };
}

/** With --profile: where the profiles go, and what the profiled scenarios leave. */
interface Profiling {
  dir: string;
  database: { url: string };
  poolSize: number;
  summaries: ProfileSummary[];
  logs: ServerLog[];
}

/**
 * One scenario against a server of its own under `node --cpu-prof`, started before it and stopped
 * after it: on SIGTERM the server exits 0, and Node writes the profile on the way out. The
 * summary counts the samples of the measured window only (written beside as <id>.window.json).
 */
async function runProfiled(target: Target, spec: LoadSpec, profiling: Profiling, options: Options): Promise<ScenarioRun> {
  const file = path.join(profiling.dir, `${spec.label}.cpuprofile`);
  const shown = path.relative(ROOT, file);
  for (const stale of [file, windowFileOf(file)]) rmSync(stale, { force: true });
  const nodeArgs = ['--cpu-prof', `--cpu-prof-dir=${profiling.dir}`, `--cpu-prof-name=${path.basename(file)}`];
  const server = await startServer(profiling.database, profiling.poolSize, nodeArgs, `server (profiling ${spec.label})`);
  const run = await runLoad({ ...target, server: server.child, serverPort: server.port }, { ...spec, port: server.port });
  await stopChild(server.child, 30_000);
  const code = await server.child.exited;
  if (code !== 0 || !existsSync(file)) {
    throw new Error(
      `the profiled server of ${spec.label} exited with ${String(code)}${existsSync(file) ? '' : ` and did not write ${shown}`}:\n${server.child.output()}`,
    );
  }
  if (run.window) writeFileSync(windowFileOf(file), `${JSON.stringify(run.window)}\n`);
  else log(`  warning: no measured window for ${spec.label}: its summary counts the whole profile`);
  const summary = { ...summarizeFile(file, shown), processCpu: run.serverCpu };
  profiling.summaries.push(summary);
  const kept = keepServerLog(options, target.database, server.child, spec.label);
  if (kept) profiling.logs.push(kept);
  log(`  profile ${shown}: ${summary.busySamples.toLocaleString('en')} busy samples of ${summary.samples.toLocaleString('en')} in the window`);
  return run;
}

interface Plan {
  id: string;
  scenario: string;
  kind: LoadKind;
  rows: number;
  spec: Partial<LoadSpec>;
}

async function runPlan(target: Target, options: Options, profile: Profile, plans: Plan[], profiling: Profiling | null): Promise<ScenarioRecord[]> {
  const records: ScenarioRecord[] = [];
  for (const plan of plans) {
    const spec: LoadSpec = {
      label: plan.id,
      kind: plan.kind,
      host: '127.0.0.1',
      port: isCeiling(plan.kind) ? target.ceilingsPort : target.serverPort,
      connections: options.connections,
      warmupMs: profile.warmupMs,
      warmupLimitMs: profile.warmupLimitMs,
      durationMs: profile.durationMs,
      maxRequests: profile.maxRequests,
      timeoutMs: REQUEST_TIMEOUT_MS,
      rows: { offset: 0, count: 0, stride: 1 },
      grants: 0,
      refreshGrants: [],
      intervalMs: 1000,
      timeline: false,
      ...plan.spec,
    };
    log(`${target.database}: ${plan.scenario} (${plan.rows.toLocaleString('en')} rows)`);
    if (target.checkpoint) await target.checkpoint();
    const run = profiling && !isCeiling(plan.kind) ? await runProfiled(target, spec, profiling, options) : await runLoad(target, spec);
    const r = run.result;
    log(
      `  ${Math.round(r.requestsPerSecond)} req/s, p50 ${r.p50Ms.toFixed(2)} ms, p99 ${r.p99Ms.toFixed(2)} ms, load CPU ${r.loadCpu.toFixed(2)}, warm-up ${r.warmupSeconds.toFixed(1)} s`,
    );
    if (r.poolCycledInWarmup === false) log('  warning: the warm-up ended before every code of the pool was polled once');
    if (r.loadCpu > 0.9) log('  warning: the load generator was near a full core; this figure may be its limit, not the server');
    if (r.waitsForDueCode > 0) log(`  warning: no code was due ${r.waitsForDueCode} times: the pool, not the server, capped this rate`);
    if (r.poolExhausted) log(`  warning: all ${spec.rows.count.toLocaleString('en')} authorization codes were redeemed: the window was cut short`);
    records.push(recordOf(run, { id: plan.id, scenario: plan.scenario, kind: plan.kind, database: target.database, rows: plan.rows }));
  }
  return records;
}

/**
 * Ratios to the ceilings measured in the same phase (same data set, same minutes). On PostgreSQL
 * an UPDATE ceiling runs between every two scenarios, so the phase's mean ceiling samples the
 * machine's speed across the whole phase; every scenario is divided by that mean. The mean of
 * only the two ceilings beside a scenario follows drift within the phase, but on this VM single
 * 10 s windows jumped by a third between neighbours, and in five full runs, wherever the two
 * views differed by more than 0.05 at 1,000,000 rows, the ratio by CPU per request (which no
 * ceiling enters) sided with the phase's mean, nine times of nine. It is kept beside it.
 */
function withRatios(records: ScenarioRecord[]): ScenarioRecord[] {
  const form = records.find((r) => r.kind === 'form')?.result.requestsPerSecond ?? null;
  const rate = (r: ScenarioRecord | undefined) => r?.result.requestsPerSecond;
  const updates = records.filter((r) => r.kind === 'update').map((r) => r.result.requestsPerSecond);
  const phaseUpdate = updates.length > 0 ? updates.reduce((a, b) => a + b, 0) / updates.length : null;
  return records.map((r, i) => {
    const before = rate(
      records
        .slice(0, i)
        .reverse()
        .find((other) => other.kind === 'update'),
    );
    const after = rate(records.slice(i + 1).find((other) => other.kind === 'update'));
    const neighbours = !isCeiling(r.kind) && before !== undefined && after !== undefined ? (before + after) / 2 : null;
    return {
      ...r,
      vsForm: form ? r.result.requestsPerSecond / form : null,
      vsUpdate: phaseUpdate ? r.result.requestsPerSecond / phaseUpdate : null,
      vsNeighbourUpdates: neighbours ? r.result.requestsPerSecond / neighbours : null,
    };
  });
}

/** n grants of one parity (odd: openid), spread evenly over [from, to). */
function spreadGrants(from: number, to: number, parity: 0 | 1, n: number): number[] {
  const step = Math.max(2, Math.floor((to - from) / n / 2) * 2);
  const first = from % 2 === parity ? from : from + 1;
  const grants = Array.from({ length: n }, (_, k) => first + k * step).filter((c) => c < to);
  if (grants.length < n) throw new Error(`only ${grants.length} grants for ${n} refresh workers and spares: more rows or fewer connections`);
  return grants;
}

/**
 * Authorization codes to seed for the auth-code scenario (each is redeemed once): none when the
 * run will not redeem any (--soak, or --only without auth-code).
 */
function authCodesOf(options: Options, profile: Profile): number {
  if (options.soak || (options.only && !options.only.includes('auth-code'))) return 0;
  return profile.authCodes;
}

/** The scenarios of one data set. `from` is where grants untouched by earlier phases begin. */
function plansFor(rows: number, from: number, options: Options, profile: Profile, suffix: string, all: boolean, bracketed: boolean): Plan[] {
  const workers = options.connections * 2;
  const poolSize = Math.min(profile.pollPool, rows);
  // At scale a rotation writes about six random pages (its grant, and leaves of the token and
  // event indexes) out of tens of thousands, and the first change to each after the scenario's
  // CHECKPOINT logs the whole page. After the usual 3 s of warm-up the measured window still paid
  // 0.54 full-page images and 4 kB of WAL per rotation; after 30 s, none and 1.55 kB, as at 20,000
  // rows. A server checkpointing every 5 minutes is in that transient for seconds of each cycle,
  // so the window measures the rest of it; docs/benchmarks.md reports the transient.
  const refreshWarmup = suffix ? { warmupMs: profile.scaleRefreshWarmupMs } : {};
  const plans: Plan[] = [
    { id: `form${suffix}`, scenario: 'ceiling: form → JSON', kind: 'form', rows, spec: {} },
    { id: `update${suffix}`, scenario: 'ceiling: one UPDATE … RETURNING', kind: 'update', rows, spec: {} },
    {
      id: `poll${suffix}`,
      scenario: 'poll (interval 1 s, well-behaved)',
      kind: 'poll',
      rows,
      spec: { rows: { offset: 0, count: poolSize, stride: Math.max(1, Math.floor(rows / poolSize)) } },
    },
  ];
  if (all)
    plans.push({
      id: `poll-slow_down${suffix}`,
      scenario: 'poll too fast (slow_down)',
      kind: 'poll-fast',
      rows,
      spec: { rows: { offset: 0, count: options.connections, stride: 1 } },
    });
  plans.push(
    { id: `refresh${suffix}`, scenario: 'refresh', kind: 'refresh', rows, spec: { refreshGrants: spreadGrants(from, rows, 0, workers), ...refreshWarmup } },
    {
      id: `refresh-openid${suffix}`,
      scenario: 'refresh with openid',
      kind: 'refresh',
      rows,
      spec: { refreshGrants: spreadGrants(from, rows, 1, workers), ...refreshWarmup },
    },
    { id: `introspect${suffix}`, scenario: 'introspect', kind: 'introspect', rows, spec: { grants: rows } },
  );
  // Beside the Bearer ones: the same pool of codes as poll (whose warm-up cycles it again), and
  // grants of their own, even ones between refresh's. In a full run on PostgreSQL at its first
  // size, or when asked for (--only); not in --quick, which CI runs and whose time is bounded.
  const dpopScenarios = options.only ? options.only.some((id) => id.startsWith('dpop-')) : !options.quick && all && bracketed;
  if (dpopScenarios) {
    plans.push(
      {
        id: `dpop-poll${suffix}`,
        scenario: 'poll with a DPoP proof (interval 1 s, well-behaved)',
        kind: 'dpop-poll',
        rows,
        spec: { rows: { offset: 0, count: poolSize, stride: Math.max(1, Math.floor(rows / poolSize)) } },
      },
      {
        id: `dpop-refresh${suffix}`,
        scenario: 'refresh with a DPoP proof',
        kind: 'dpop-refresh',
        rows,
        // Two past each of refresh's (whose step is at least 78 at 20,000 rows): never the same grant.
        spec: { refreshGrants: spreadGrants(from, rows, 0, workers).map((grant) => grant + 2), ...refreshWarmup },
      },
    );
  }
  if (all) {
    plans.push(
      { id: `userinfo${suffix}`, scenario: 'userinfo', kind: 'userinfo', rows, spec: { grants: rows } },
      // Last: every code request adds a device request, every redemption a grant.
      { id: `code${suffix}`, scenario: 'code (device authorization)', kind: 'code', rows, spec: {} },
      {
        id: `auth-code${suffix}`,
        scenario: 'authorization code (redeem)',
        kind: 'auth-code',
        rows,
        spec: { rows: { offset: 0, count: authCodesOf(options, profile), stride: 1 } },
      },
    );
  }
  const ceilings = plans.filter((plan) => isCeiling(plan.kind));
  const scenarios = plans.filter((plan) => !isCeiling(plan.kind));
  const order = (plan: Plan) => options.only?.indexOf(plan.id.slice(0, plan.id.length - suffix.length)) ?? 0;
  const chosen = options.only ? scenarios.filter((plan) => order(plan) >= 0).sort((a, b) => order(a) - order(b)) : scenarios;
  if (chosen.length === 0) return ceilings;
  const updateAfter = (plan: Plan, last: boolean): Plan => ({
    id: last ? `update-again${suffix}` : `update-after-${plan.id}`,
    scenario: last ? 'ceiling: one UPDATE … RETURNING, again at the end' : `ceiling: one UPDATE … RETURNING, after ${plan.scenario}`,
    kind: 'update',
    rows,
    spec: {},
  });
  // Bracketed: an UPDATE ceiling after every scenario, so that the phase's mean ceiling samples
  // the machine's speed all through the phase (withRatios).
  const measured = chosen.flatMap((plan, i) => (bracketed || i === chosen.length - 1 ? [plan, updateAfter(plan, i === chosen.length - 1)] : [plan]));
  return [...ceilings, ...measured];
}

// ---------------------------------------------------------------------------------------------
// Phases.

async function adminQuery(adminUrl: string, statement: string): Promise<void> {
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    await admin.query(statement);
  } finally {
    await admin.end();
  }
}

function sampleRss(pid: number, into: Array<{ at: number; rssMb: number }>): NodeJS.Timeout {
  const timer = setInterval(() => {
    const memory = memoryOf(pid);
    if (memory) into.push({ at: performance.now(), rssMb: memory.rssMb });
  }, 1000);
  timer.unref();
  return timer;
}

/**
 * What the server logged (at LOG_LEVEL=warn: warnings and errors only), kept beside the JSON
 * so that a 500 in the table can be traced to its cause.
 */
function keepServerLog(options: Options, database: DatabaseKind, server: Child, scenario?: string): ServerLog | null {
  const output = server.output().trim();
  if (output === '') return null;
  const file = path.join(path.dirname(path.resolve(ROOT, options.json)), `server-${database}${scenario ? `-${scenario}` : ''}.log`);
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, `${output}\n`);
  const lines = output.split('\n');
  return { database, lines: lines.length, file: path.relative(ROOT, file), first: lines[0]!.slice(0, 300) };
}

async function memoryAfter(database: DatabaseKind, server: Child): Promise<MemoryRecord> {
  await new Promise((resolve) => setTimeout(resolve, 2000));
  const memory = memoryOf(server.pid);
  return { database, peakMb: memory?.peakMb ?? NaN, afterMb: memory?.rssMb ?? NaN };
}

interface PostgresOutcome {
  records: ScenarioRecord[];
  /** null with --profile: no server lives through the whole phase. */
  memory: MemoryRecord | null;
  logs: ServerLog[];
  profiles: ProfileSummary[] | null;
  rs256: number | null;
  soak: RunResults['soak'];
  version: string;
  /** Which PostgreSQL server, and how it is configured. */
  serverDescription: string;
}

/** The server the PostgreSQL phase runs on: BENCH_DATABASE_URL's, or a cluster of the run's own. */
async function postgresServer(options: Options): Promise<{ adminUrl: string; description: string }> {
  if (options.adminUrl) return { adminUrl: options.adminUrl, description: 'the server at BENCH_DATABASE_URL, as it is configured' };
  const bin = findPostgresBin();
  if (!bin) {
    throw new Error(
      "no initdb and pg_ctl found for a PostgreSQL cluster of the benchmark's own: set BENCH_POSTGRES_BIN to their folder, or BENCH_DATABASE_URL to run on a server of yours",
    );
  }
  const cluster = await startCluster(bin, log);
  // Pushed before the database's own cleanup, so run after it (cleanups run in reverse).
  cleanups.push(async () => {
    cluster.stop();
    log('stopped and removed the cluster');
  });
  process.on('exit', () => cluster.stop());
  return { adminUrl: cluster.url, description: cluster.description };
}

async function postgresPhase(options: Options, profile: Profile): Promise<PostgresOutcome> {
  const postgres = await postgresServer(options);
  const name = `bench_${randomBytes(6).toString('hex')}`;
  await adminQuery(postgres.adminUrl, `CREATE DATABASE ${name}`);
  cleanups.push(async () => {
    await adminQuery(postgres.adminUrl, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    log(`dropped database ${name}`);
  });
  const url = withDatabase(postgres.adminUrl, name);
  log(`database ${name}`);
  const handle: DatabaseHandle = await connectDatabase({ databaseUrl: url, dataDir: 'unused', poolSize: 2 });
  cleanups.push(() => handle.close());
  const execute = (statement: string) =>
    sql
      .raw(statement)
      .execute(handle.db)
      .then(() => undefined);
  const settings = (
    await sql<{ server_version: string; server_version_num: string; shared_buffers: string }>`
      SELECT current_setting('server_version') AS server_version, current_setting('server_version_num') AS server_version_num,
             current_setting('shared_buffers') AS shared_buffers`.execute(handle.db)
  ).rows[0];
  // The buffer cache decides how much of the 1,000,000-row data set a lookup finds in memory.
  const version = `${settings?.server_version ?? 'unknown'}, shared_buffers ${settings?.shared_buffers ?? 'unknown'}`;
  // PostgreSQL 17 moved the checkpoint counts from pg_stat_bgwriter to pg_stat_checkpointer.
  const checkpointsStarted =
    Number(settings?.server_version_num) >= 170000
      ? sql`SELECT num_timed + num_requested FROM pg_stat_checkpointer`
      : sql`SELECT checkpoints_timed + checkpoints_req FROM pg_stat_bgwriter`;

  await migrateToLatest(handle.db);
  const base = { pending: profile.rows, grants: profile.rows, codes: authCodesOf(options, profile) };
  await seed(execute, { pending: 0, grants: 0, codes: 0 }, base, options.connections, (line) => log(`seed: ${line}`), 2);

  const resultsDir = path.dirname(path.resolve(ROOT, options.json));
  const profiling: Profiling | null = options.cpuProfile
    ? { dir: path.join(resultsDir, 'profiles'), database: { url }, poolSize: options.poolSize, summaries: [], logs: [] }
    : null;
  if (profiling) mkdirSync(profiling.dir, { recursive: true });
  const [server, ceilings] = await Promise.all([
    profiling ? Promise.resolve(null) : startServer({ url }, options.poolSize),
    options.soak ? Promise.resolve(null) : startCeilings({ url }, options.poolSize),
  ]);
  const rss: Array<{ at: number; rssMb: number }> = [];
  const rssTimer = server ? sampleRss(server.child.pid, rss) : undefined;
  const target: Target = {
    database: 'postgres',
    server: server?.child ?? null,
    serverPort: server?.port ?? 0,
    ceilings: ceilings?.child ?? null,
    ceilingsPort: ceilings?.port ?? 0,
    dbPids: async () =>
      (await sql<{ pid: number }>`SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`.execute(handle.db)).rows.map(
        (row) => row.pid,
      ),
    // The LSN counts bytes exactly; full-page images come from pg_stat_wal, which backends
    // update about once a second, so that figure is approximate over a short window.
    databaseCounters: async () => {
      const row = (
        await sql<{ bytes: string; full_page_images: string; checkpoints: string; maintenance_runs: Record<string, number>; maintaining: string[] }>`
          SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::text AS bytes,
                 (SELECT wal_fpi FROM pg_stat_wal)::text AS full_page_images,
                 (${checkpointsStarted})::text AS checkpoints,
                 (SELECT coalesce(json_object_agg(relname, autovacuum_count + autoanalyze_count), '{}') FROM pg_stat_user_tables) AS maintenance_runs,
                 (SELECT coalesce(json_agg(DISTINCT c.relname), '[]') FROM pg_class c
                  WHERE c.oid IN (SELECT relid FROM pg_stat_progress_vacuum WHERE datname = current_database()
                                  UNION SELECT relid FROM pg_stat_progress_analyze WHERE datname = current_database())) AS maintaining`.execute(handle.db)
      ).rows[0];
      return {
        bytes: Number(row?.bytes ?? NaN),
        fullPageImages: Number(row?.full_page_images ?? NaN),
        checkpoints: Number(row?.checkpoints ?? NaN),
        maintenanceRuns: row?.maintenance_runs ?? {},
        maintaining: row?.maintaining ?? [],
      };
    },
    checkpoint: async () => {
      await sql`CHECKPOINT`.execute(handle.db);
    },
  };

  if (options.soak) {
    if (!server) throw new Error('--soak does not combine with --profile');
    const poolSize = Math.min(profile.pollPool, profile.rows);
    log(`soak: ${profile.soakMs / 60_000} minutes of well-behaved polls over ${poolSize.toLocaleString('en')} codes`);
    const run = await runLoad(target, {
      label: 'soak',
      kind: 'poll',
      host: '127.0.0.1',
      port: server.port,
      connections: options.connections,
      warmupMs: profile.warmupMs,
      warmupLimitMs: profile.warmupLimitMs,
      durationMs: profile.soakMs,
      maxRequests: 10_000_000,
      timeoutMs: REQUEST_TIMEOUT_MS,
      rows: { offset: 0, count: poolSize, stride: 1 },
      grants: 0,
      refreshGrants: [],
      intervalMs: 1000,
      timeline: true,
    });
    clearInterval(rssTimer);
    const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? NaN;
    const minutes = run.result.minutes.map((m) => ({
      minute: m.minute,
      requestsPerSecond: m.requestsPerSecond,
      p99Ms: m.p99Ms,
      rssMb: median(rss.filter((s) => s.at >= run.startedAt + m.minute * 60_000 && s.at < run.startedAt + (m.minute + 1) * 60_000).map((s) => s.rssMb)),
    }));
    const record = recordOf(run, {
      id: 'soak',
      scenario: `poll soak (${profile.soakMs / 60_000} min)`,
      kind: 'poll',
      database: 'postgres',
      rows: profile.rows,
    });
    const memory = await memoryAfter('postgres', server.child);
    const logs = [keepServerLog(options, 'postgres', server.child)].filter((kept) => kept !== null);
    return { records: [record], memory, logs, profiles: null, rs256: null, soak: { minutes }, version, serverDescription: postgres.description };
  }

  log('RS256 signature alone');
  const signed = JSON.parse(await runToEnd(spawnChild('sign', SERVER_CORE, [...bench('sign.ts'), String(profile.signMs)], childEnv()), 120_000)) as {
    opsPerSecond: number;
  };

  const records = withRatios(await runPlan(target, options, profile, plansFor(profile.rows, 0, options, profile, '', true, true), profiling));
  if (options.scale) {
    log(`seeding up to ${profile.scaleRows.toLocaleString('en')} live device requests and grants`);
    const seeded = performance.now();
    await seed(
      execute,
      base,
      { pending: profile.scaleRows, grants: profile.scaleRows, codes: base.codes },
      options.connections,
      (line) => log(`seed: ${line}`),
      2,
    );
    log(`  seeded in ${((performance.now() - seeded) / 1000).toFixed(0)} s`);
    const scale = await runPlan(target, options, profile, plansFor(profile.scaleRows, profile.rows, options, profile, '@scale', false, true), profiling);
    records.push(...withRatios(scale));
  }
  clearInterval(rssTimer);
  const memory = server ? await memoryAfter('postgres', server.child) : null;
  await Promise.all([server, ceilings].map((started) => (started ? stopChild(started.child) : undefined)));
  const logs = [server && keepServerLog(options, 'postgres', server.child), ...(profiling?.logs ?? [])].filter((kept) => kept !== null);
  return {
    records,
    memory,
    logs,
    profiles: profiling?.summaries ?? null,
    rs256: signed.opsPerSecond,
    soak: null,
    version,
    serverDescription: postgres.description,
  };
}

async function embeddedPhase(options: Options, profile: Profile): Promise<{ records: ScenarioRecord[]; memory: MemoryRecord; log: ServerLog | null }> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'device-auth-bench-'));
  cleanups.push(async () => rmSync(dir, { recursive: true, force: true }));
  const dataDir = path.join(dir, 'server');
  log('embedded: seeding (no server running)');
  await runToEnd(
    spawnChild(
      'embedded seeding',
      SERVER_CORE,
      [
        ...bench('seed-embedded.ts'),
        dataDir,
        JSON.stringify({ pending: profile.rows, grants: profile.rows, codes: authCodesOf(options, profile), fastCodes: options.connections }),
      ],
      childEnv(),
    ),
    10 * 60_000,
  );
  const [server, ceilings] = await Promise.all([
    startServer({ dataDir }, options.poolSize),
    startCeilings({ dataDir: path.join(dir, 'ceilings') }, options.poolSize),
  ]);
  const target: Target = {
    database: 'embedded',
    server: server.child,
    serverPort: server.port,
    ceilings: ceilings.child,
    ceilingsPort: ceilings.port,
    dbPids: null,
    databaseCounters: null,
    checkpoint: null,
  };
  const records = withRatios(await runPlan(target, options, profile, plansFor(profile.rows, 0, options, profile, '', true, false), null)).map((r) => ({
    ...r,
    id: `embedded:${r.id}`,
  }));
  const memory = await memoryAfter('embedded', server.child);
  await Promise.all([stopChild(server.child), stopChild(ceilings.child)]);
  return { records, memory, log: keepServerLog(options, 'embedded', server.child) };
}

// ---------------------------------------------------------------------------------------------
// Verdicts.

const find = (records: ScenarioRecord[], id: string) => records.find((r) => r.id === id);
const fixed = (n: number) => n.toFixed(2);

function targetsOf(results: Pick<RunResults, 'scenarios' | 'memory' | 'soak'>): Verdict[] {
  const verdicts: Verdict[] = [];
  const records = results.scenarios;
  const update = find(records, 'update');
  const atLeast = (id: string, goal: number) => {
    const r = find(records, id);
    if (r?.vsUpdate === null || r?.vsUpdate === undefined) return;
    const beside = r.vsNeighbourUpdates ? ` (× the two ceilings beside it ${fixed(r.vsNeighbourUpdates)})` : '';
    verdicts.push({
      name: `${r.scenario} / the phase's mean UPDATE ceiling`,
      value: `${fixed(r.vsUpdate)}${beside}`,
      goal: `≥ ${goal}`,
      pass: r.vsUpdate >= goal,
    });
  };
  atLeast('poll', 0.85);
  const poll = find(records, 'poll');
  if (poll && update) {
    const value = poll.result.p99Ms / update.result.p99Ms;
    verdicts.push({
      name: 'poll p99 / UPDATE ceiling p99',
      value: `${fixed(value)} (${fixed(poll.result.p99Ms)} ms / ${fixed(update.result.p99Ms)} ms)`,
      goal: '≤ 2',
      pass: value <= 2,
    });
  }
  atLeast('code', 0.7);
  atLeast('refresh', 0.4);
  atLeast('refresh-openid', 0.15);
  atLeast('introspect', 0.8);
  for (const id of ['poll', 'refresh', 'refresh-openid', 'introspect']) {
    const small = find(records, id);
    const large = find(records, `${id}@scale`);
    if (!small?.vsUpdate || !large?.vsUpdate) continue;
    const kept = large.vsUpdate / small.vsUpdate;
    const raw = large.result.requestsPerSecond / small.result.requestsPerSecond;
    // Server and database CPU per request, the other drift-resistant view: cost at 20,000 / cost at scale.
    const cost = (r: ScenarioRecord) => (r.serverCpu === null || r.dbCpu === null ? null : (r.serverCpu + r.dbCpu) / r.result.requestsPerSecond);
    const costs = [cost(small), cost(large)];
    const byCpu = costs[0] && costs[1] ? `; by CPU per request ${fixed(costs[0] / costs[1])}` : '';
    const byNeighbours =
      small.vsNeighbourUpdates && large.vsNeighbourUpdates
        ? `; × the two ceilings beside each ${fixed(large.vsNeighbourUpdates / small.vsNeighbourUpdates)}`
        : '';
    verdicts.push({
      name: `${small.scenario} at ${large.rows.toLocaleString('en')} rows / at ${small.rows.toLocaleString('en')} (req/s, each × its phase's mean UPDATE ceiling)`,
      value: `${fixed(kept)} (raw req/s ${fixed(raw)}${byCpu}${byNeighbours})`,
      goal: '≥ 0.9',
      pass: kept >= 0.9,
    });
  }
  const memory = results.memory.find((m) => m.database === 'postgres');
  if (memory) verdicts.push({ name: 'server peak RSS (PostgreSQL)', value: `${memory.peakMb.toFixed(1)} MB`, goal: '≤ 200 MB', pass: memory.peakMb <= 200 });
  const minutes = results.soak?.minutes.filter((m) => Number.isFinite(m.rssMb)) ?? [];
  if (minutes.length >= 2) {
    const first = minutes[0]!;
    const last = minutes.at(-1)!;
    verdicts.push({
      name: 'soak: median server RSS, last minute against first',
      value: `${last.rssMb.toFixed(1)} MB against ${first.rssMb.toFixed(1)} MB`,
      goal: 'no growth (≤ +5%)',
      pass: last.rssMb <= first.rssMb * 1.05,
    });
  }
  return verdicts;
}

const EXPECTED: Record<LoadKind, string[]> = {
  form: ['200'],
  update: ['200'],
  code: ['200'],
  poll: ['400 authorization_pending'],
  // A fresh code's first poll is on time; every later one is too soon.
  'poll-fast': ['400 slow_down', '400 authorization_pending'],
  refresh: ['200'],
  'dpop-poll': ['400 authorization_pending'],
  'dpop-refresh': ['200'],
  introspect: ['200 active'],
  userinfo: ['200'],
  // An access token and an ID token, no refresh token (openid profile, without offline_access).
  'auth-code': ['200'],
};

/**
 * The benchmark measured what it meant to: the server's answers are the expected ones (0.1% slack),
 * transport failures (timeouts under an overloaded machine) stay rare, and no refresh worker ever
 * got invalid_grant: each grant has one holder, so that would be a bug.
 */
function checksOf(records: ScenarioRecord[]): Verdict[] {
  const verdicts: Verdict[] = [];
  for (const r of records) {
    const entries = Object.entries(r.result.mixAll);
    const total = entries.reduce((sum, [, n]) => sum + n, 0);
    const failed = entries.filter(([key]) => key.startsWith('failed')).reduce((sum, [, n]) => sum + n, 0);
    const unexpected = entries.filter(([key]) => !key.startsWith('failed') && !EXPECTED[r.kind].includes(key)).reduce((sum, [, n]) => sum + n, 0);
    verdicts.push({
      name: `${r.id}: answers are ${EXPECTED[r.kind].join(' or ')}`,
      value: total === 0 ? 'no answers' : `${unexpected} of ${total - failed} were not`,
      goal: '≤ 0.1%',
      pass: total > failed && unexpected <= (total - failed) * 0.001,
    });
    // A window that never opened (a warm-up that never ended, say) would otherwise pass on its warm-up's answers.
    verdicts.push({ name: `${r.id}: the measured window has answers`, value: String(r.result.requests), goal: '> 0', pass: r.result.requests > 0 });
    if (failed > 0) {
      verdicts.push({ name: `${r.id}: transport failures`, value: `${failed} of ${total}`, goal: '≤ 1%', pass: failed <= total * 0.01 });
    }
    if (r.kind === 'refresh' || r.kind === 'dpop-refresh') {
      const invalid = r.result.mixAll['400 invalid_grant'] ?? 0;
      verdicts.push({
        name: `${r.id}: no worker got invalid_grant for its own grant`,
        value: `${invalid} (grants given up: ${r.result.grantsLost})`,
        goal: '0',
        pass: invalid === 0,
      });
    }
  }
  return verdicts;
}

// ---------------------------------------------------------------------------------------------

function machineOf(pgVersion: string | null, loadStart: number): Record<string, string | number | boolean> {
  const model =
    /^model name\s*:\s*(.+)$/m.exec(existsSync('/proc/cpuinfo') ? readFileSync('/proc/cpuinfo', 'utf8') : '')?.[1] ?? os.cpus()[0]?.model ?? 'unknown';
  return {
    cpu: model.trim(),
    cores: os.cpus().length,
    memory: `${Math.round(os.totalmem() / 2 ** 30)} GiB`,
    node: process.version,
    postgresql: pgVersion ?? 'not used',
    'load average at start': loadStart.toFixed(1),
    'load average at end': os.loadavg()[0]!.toFixed(1),
  };
}

function commitOf(): string | null {
  try {
    const commit = execFileSync('git', ['rev-parse', 'HEAD'], { cwd: ROOT, encoding: 'utf8' }).trim();
    const dirty = execFileSync('git', ['status', '--porcelain', '--untracked-files=no'], { cwd: ROOT, encoding: 'utf8' }).trim() !== '';
    return dirty ? `${commit}+changes` : commit;
  } catch {
    return null;
  }
}

async function main(): Promise<number> {
  const options = parseOptions(process.argv.slice(2));
  if (options.report) {
    const earlier = JSON.parse(readFileSync(options.report, 'utf8')) as RunResults;
    earlier.checks = checksOf(earlier.scenarios);
    earlier.targets = targetsOf(earlier);
    const baseline = options.baseline ? (JSON.parse(readFileSync(options.baseline, 'utf8')) as RunResults) : null;
    process.stdout.write(renderMarkdown(earlier, baseline));
    return 0;
  }
  const profile = profileOf(options);
  hardDeadline = setTimeout(() => {
    log(`hard deadline of ${profile.deadlineMs / 60_000} minutes reached: stopping`);
    stoppingWith = 1;
    void cleanup().finally(() => process.exit(1));
  }, profile.deadlineMs);
  hardDeadline.unref();
  if (!existsSync(SERVER)) throw new Error('dist/src/server.js is missing: `npm run bench` builds first; or run `npm run build`');
  const loadStart = os.loadavg()[0]!;
  const started = performance.now();

  const postgres = await postgresPhase(options, profile);
  const scenarios = [...postgres.records];
  const memory = postgres.memory ? [postgres.memory] : [];
  const serverLogs = [...postgres.logs];
  if (options.embedded && options.cpuProfile) log('--profile: the embedded database is skipped');
  if (options.embedded && !options.soak && !options.cpuProfile) {
    const embedded = await embeddedPhase(options, profile);
    scenarios.push(...embedded.records);
    memory.push(embedded.memory);
    if (embedded.log) serverLogs.push(embedded.log);
  }

  const results: RunResults = {
    version: 1,
    date: new Date().toISOString(),
    commit: commitOf(),
    mode: options.quick ? (options.soak ? 'quick soak' : 'quick') : options.soak ? 'soak' : 'full',
    machine: machineOf(postgres.version, loadStart),
    settings: {
      'server and ceilings': pinning ? `core ${SERVER_CORE} (taskset)` : 'not pinned (no taskset)',
      'load generator': pinning ? `core ${LOAD_CORE} (taskset), own HTTP/1.1 keep-alive client` : 'not pinned, own HTTP/1.1 keep-alive client',
      postgresql: `${postgres.serverDescription}; not pinned`,
      connections: options.connections,
      DATABASE_POOL_SIZE: options.poolSize,
      'warm-up s': profile.warmupMs / 1000,
      'poll warm-up': `until every code of the pool was polled once (its first write since the checkpoint each PostgreSQL scenario begins with), at most ${profile.warmupLimitMs / 1000} s`,
      'refresh warm-up at scale s': `${profile.scaleRefreshWarmupMs / 1000} (past the full-page images that follow the checkpoint)`,
      'measured s': (options.soak ? profile.soakMs : profile.durationMs) / 1000,
      'poll pool': Math.min(profile.pollPool, profile.rows),
      'authorization codes': `${authCodesOf(options, profile).toLocaleString('en')} seeded, each redeemed once (${AUTH_CODE_RATE_BOUND.toLocaleString('en')}/s × warm-up and measured s); scope openid profile`,
      'rate limits': `${RAISED_LIMITS.RATE_LIMIT_TOKEN_PER_CLIENT} (≥ 1000 per window: counted in memory)`,
      server: `dist/src/server.js, NODE_ENV=production, NODE_OPTIONS=${IMAGE_NODE_OPTIONS} (the Dockerfile's), LOG_LEVEL=warn, DEVICE_POLL_INTERVAL=1, PURGE_INTERVAL=0`,
      ...(options.cpuProfile
        ? { 'CPU profile': 'node --cpu-prof (1 ms sampling), a fresh server per scenario, no server RSS; the server figures include the profiler' }
        : {}),
      'run took s': Math.round((performance.now() - started) / 1000),
    },
    scenarios,
    rs256OpsPerSecond: postgres.rs256,
    memory,
    serverLogs,
    soak: postgres.soak,
    ...(postgres.profiles ? { profiles: postgres.profiles } : {}),
    targets: [],
    checks: checksOf(scenarios),
  };
  results.targets = targetsOf(results);

  const baseline = options.baseline ? (JSON.parse(readFileSync(options.baseline, 'utf8')) as RunResults) : null;
  process.stdout.write(renderMarkdown(results, baseline));
  const jsonPath = path.resolve(ROOT, options.json);
  mkdirSync(path.dirname(jsonPath), { recursive: true });
  writeFileSync(jsonPath, `${JSON.stringify(results, null, 2)}\n`);
  log(`results written to ${path.relative(ROOT, jsonPath)}`);

  const failedChecks = results.checks.filter((v) => !v.pass);
  const failedTargets = results.targets.filter((v) => !v.pass);
  if (failedChecks.length > 0) {
    log(`${failedChecks.length} check(s) failed: the benchmark did not measure what it meant to`);
    return 1;
  }
  if (failedTargets.length > 0) {
    if (options.enforce && !options.quick) {
      log(`${failedTargets.length} target(s) failed (--enforce)`);
      return 1;
    }
    log(`${failedTargets.length} target(s) failed (not enforced${options.quick ? ' in --quick' : ': add --enforce'})`);
  }
  return 0;
}

main()
  .then(
    // A run that measured everything is judged on what it measured: the cluster's shutdown
    // afterwards is not part of the deadline (a slow machine once turned a pass into a failure there).
    (code) => {
      clearTimeout(hardDeadline);
      return cleanup().then(() => code);
    },
    (error: unknown) => {
      if (stoppingWith === null) log(`failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
      return cleanup().then(() => 1);
    },
  )
  .then((code) => process.exit(stoppingWith ?? code));
