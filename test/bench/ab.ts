/**
 * `npm run bench:ab -- --against DIR`: this checkout's server against another checkout's (an
 * earlier commit, built), interleaved. `npm run bench` measures one commit at a time, and on a
 * shared two-core VM the machine's own speed drifts by 10-50 % over minutes (docs/benchmarks.md),
 * so two runs minutes apart cannot settle a 3 % question. Here each scenario runs in short slices,
 * one side after the other, the order reversed every round (AB, BA, AB, …): a drift slower than a
 * round falls on both sides alike, and each round gives one ratio. The report gives, per scenario,
 * the median of the rounds' ratios (this / other) of requests per second, server CPU per request,
 * database CPU per request and WAL per request, with their lowest and highest.
 *
 * Each side has a database of its own in one PostgreSQL cluster, migrated and seeded by its own
 * checkout's code (ab-prepare.ts), and a server of its own; only the side being measured gets
 * load. Servers on core 0, the load generator on core 1, as in `npm run bench`.
 *
 * `--together` runs both sides at once instead, each with its own load, both servers on core 0:
 * the two servers share one core (and the database's backends the other) through the same
 * seconds, so whatever the machine does to one it does to the other, and the ratio of their
 * requests per second is the ratio of what a request costs each, without the drift between
 * slices. WAL is the cluster's, shared by both sides, so it is not given per side in this mode.
 * Check the method before trusting it: a checkout against itself should give 1, and moved by about
 * 3 % from run to run on the read paths here (docs/benchmarks.md), so run a comparison twice.
 *
 * usage: npm run bench:ab -- --against DIR [--this DIR] [--only poll,refresh,code,introspect,userinfo]
 *        [--rounds 6] [--seconds 5] [--warmup 2] [--connections 64] [--together] [--this-env KEY=VALUE]… [--json PATH]
 *        [--cpu-prof DIR]
 * `--this-env KEY=VALUE` (repeatable) starts this side's server with that setting as well, so the
 * cost of one setting is measured against the same checkout without it: `--against . --this-env
 * HTTP_MAX_REQUESTS_PER_SOCKET=0 --together`.
 * `--cpu-prof DIR` starts both servers with node's --cpu-prof, a profile per side in DIR/this and
 * DIR/other, written when they stop. It samples wall time: with both sides on one core
 * (`--together`) a side's samples include the time it waited for the core, so compare the shares
 * of its busy samples, per request, not their sum.
 * `--this` measures another built checkout in this one's place (default: this checkout), so that
 * two earlier commits can be compared, say one issue's branch against the commit it started from.
 * DIR is a checkout with node_modules and `npm run build` done, e.g.
 *   git worktree add ../before <commit> && cp -al node_modules ../before/ && (cd ../before && npm run build)
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { freePort } from '../helpers/server-process.js';
import { findPostgresBin, startCluster, withDatabase } from './cluster.js';
import { cpuSecondsOf, killAllChildrenNow, LOAD_CORE, ROOT, runToEnd, SERVER_CORE, spawnChild, stopAllChildren, waitForHttp, type Child } from './processes.js';
import type { LoadKind, LoadResult, LoadSpec } from './scenarios.js';
import { childEnv, REQUEST_TIMEOUT_MS, SERVER_SETTINGS } from './server-env.js';

const log = (line: string) => process.stderr.write(`[bench:ab] ${line}\n`);

const KINDS: readonly LoadKind[] = ['poll', 'refresh', 'code', 'introspect', 'userinfo'];
const ROWS = 20_000;
/** Refresh grants per round: each round rotates grants of its own, so no side presents a token it already replaced. */
const REFRESH_BLOCK = ROWS / 10;

interface AbOptions {
  against: string;
  this: string;
  only: LoadKind[];
  rounds: number;
  seconds: number;
  warmup: number;
  connections: number;
  together: boolean;
  /** Settings of this side's server only, over SERVER_SETTINGS. */
  thisEnv: Record<string, string>;
  json: string;
  /** A folder for each side's server CPU profile (node --cpu-prof), written when the server stops; '' for none. */
  cpuProfiles: string;
}

function parseAbOptions(argv: string[]): AbOptions {
  const options: AbOptions = {
    against: '',
    this: ROOT,
    only: [...KINDS],
    rounds: 6,
    seconds: 5,
    warmup: 2,
    connections: 64,
    together: false,
    thisEnv: {},
    json: 'test/bench/results/ab.json',
    cpuProfiles: '',
  };
  const count = (flag: string, value: string | undefined, min: number, max: number) => {
    const n = Number(value);
    if (!Number.isInteger(n) || n < min || n > max) throw new Error(`${flag} takes a whole number from ${min} to ${max}`);
    return n;
  };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i];
    if (flag === '--together') {
      options.together = true;
      continue;
    }
    const value = argv[i + 1];
    i++;
    switch (flag) {
      case '--against':
        options.against = path.resolve(value ?? '');
        break;
      case '--this':
        options.this = path.resolve(value ?? '');
        break;
      case '--only': {
        const kinds = (value ?? '').split(',');
        const unknown = kinds.filter((kind) => !KINDS.includes(kind as LoadKind));
        if (unknown.length > 0) throw new Error(`--only takes ${KINDS.join(', ')}; not ${unknown.join(', ')}`);
        options.only = kinds as LoadKind[];
        break;
      }
      case '--rounds':
        options.rounds = count(flag, value, 2, 10);
        break;
      case '--seconds':
        options.seconds = count(flag, value, 1, 60);
        break;
      case '--warmup':
        options.warmup = count(flag, value, 1, 60);
        break;
      case '--connections':
        options.connections = count(flag, value, 1, 256);
        break;
      case '--this-env': {
        const setting = /^([A-Z][A-Z0-9_]*)=(.*)$/.exec(value ?? '');
        if (!setting) throw new Error('--this-env takes KEY=VALUE, KEY a setting such as HTTP_MAX_REQUESTS_PER_SOCKET');
        options.thisEnv[setting[1]!] = setting[2]!;
        break;
      }
      case '--json':
        options.json = value ?? options.json;
        break;
      case '--cpu-prof':
        options.cpuProfiles = path.resolve(value ?? 'test/bench/results/profiles');
        break;
      default:
        throw new Error(`unknown option ${flag ?? ''}; see the comment at the top of test/bench/ab.ts`);
    }
  }
  if (!options.against) throw new Error('--against DIR is required: a built checkout to compare with');
  for (const checkout of [options.this, options.against]) {
    if (!existsSync(path.join(checkout, 'dist/src/server.js'))) throw new Error(`${checkout} has no dist/src/server.js: run npm run build there`);
    if (!existsSync(path.join(checkout, 'test/bench/seed.ts'))) throw new Error(`${checkout} has no test/bench/seed.ts to seed its database with`);
  }
  if (options.connections * 2 > REFRESH_BLOCK / 2)
    throw new Error(`--connections ${options.connections} needs more refresh grants per round than the ${REFRESH_BLOCK / 2} there are`);
  return options;
}

interface Side {
  name: 'this' | 'other';
  checkout: string;
  database: string;
  url: string;
  server: Child | null;
  port: number;
}

interface Slice {
  requestsPerSecond: number;
  serverCpuMsPerRequest: number | null;
  dbCpuMsPerRequest: number | null;
  walBytesPerRequest: number | null;
  mix: Record<string, number>;
}

function specFor(kind: LoadKind, options: AbOptions, port: number, round: number, measureFromEpochMs?: number): LoadSpec {
  // Every round rotates its own even grants (no openid: no ID token), one per connection and as many spares.
  const refreshGrants = Array.from({ length: options.connections * 2 }, (_, k) => round * REFRESH_BLOCK + 2 * k);
  return {
    label: `${kind} round ${round + 1}`,
    kind,
    host: '127.0.0.1',
    port,
    connections: options.connections,
    warmupMs: options.warmup * 1000,
    // The poll's warm-up goes on until every code of the pool was polled once; bounded.
    warmupLimitMs: Math.max(options.warmup * 1000, 20_000),
    durationMs: options.seconds * 1000,
    maxRequests: 2_000_000,
    timeoutMs: REQUEST_TIMEOUT_MS,
    rows: { offset: 0, count: ROWS, stride: 1 },
    grants: ROWS,
    refreshGrants,
    intervalMs: 1000,
    timeline: false,
    ...(measureFromEpochMs === undefined ? {} : { measureFromEpochMs }),
  };
}

async function main(): Promise<void> {
  const options = parseAbOptions(process.argv.slice(2));
  let adminUrl = process.env.BENCH_DATABASE_URL;
  let stopCluster = () => {};
  if (!adminUrl) {
    const bin = findPostgresBin();
    if (!bin) throw new Error('no initdb and pg_ctl found: set BENCH_POSTGRES_BIN or BENCH_DATABASE_URL');
    const cluster = await startCluster(bin, log);
    adminUrl = cluster.url;
    stopCluster = () => cluster.stop();
  }
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  const suffix = randomBytes(4).toString('hex');
  const sides: Side[] = [
    { name: 'this', checkout: options.this, database: `ab_this_${suffix}`, url: '', server: null, port: 0 },
    { name: 'other', checkout: options.against, database: `ab_other_${suffix}`, url: '', server: null, port: 0 },
  ];
  try {
    for (const side of sides) {
      side.url = withDatabase(adminUrl, side.database);
      await admin.query(`CREATE DATABASE ${side.database}`);
      log(`${side.name}: ${side.checkout}: migrating and seeding ${side.database}`);
      const args = ['--import', 'tsx', path.join(ROOT, 'test/bench/ab-prepare.ts'), side.checkout, side.url, String(ROWS), String(options.connections)];
      await runToEnd(spawnChild(`prepare ${side.name}`, null, args, childEnv()), 10 * 60_000);
      side.port = await freePort();
      side.server = spawnChild(
        `server (${side.name})`,
        SERVER_CORE,
        [
          ...(options.cpuProfiles ? ['--cpu-prof', `--cpu-prof-dir=${path.join(options.cpuProfiles, side.name)}`] : []),
          path.join(side.checkout, 'dist/src/server.js'),
        ],
        childEnv({
          ...SERVER_SETTINGS,
          HOST: '127.0.0.1',
          PORT: String(side.port),
          ISSUER: `http://127.0.0.1:${side.port}`,
          DATABASE_URL: side.url,
          DATABASE_POOL_SIZE: '10',
          ...(side.name === 'this' ? options.thisEnv : {}),
        }),
      );
      await waitForHttp(side.server, `http://127.0.0.1:${side.port}/readyz`, 60_000);
    }

    const backendsOf = async (side: Side) =>
      (await admin.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE datname = $1', [side.database])).rows.map((row) => row.pid);
    const walNow = async () =>
      Number((await admin.query<{ bytes: string }>(`SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::text AS bytes`)).rows[0]!.bytes);

    /** One side's measured window; `startsAt` (--together) is when both sides' windows begin, the checkpoint already made. */
    async function slice(side: Side, kind: LoadKind, round: number, startsAt?: number): Promise<Slice> {
      const together = startsAt !== undefined;
      if (!together) await admin.query('CHECKPOINT');
      const server = side.server!;
      // The backends are read at the window's start, after the warm-up: the server's pool closes
      // idle connections (30 s) while the other side is measured, and opens them again under load.
      let backends: number[] = [];
      type Mark = { at: number; server: number | null; db: number; wal: number };
      const mark = async (start: boolean): Promise<Mark> => {
        const at = performance.now();
        const serverCpu = cpuSecondsOf(server.pid);
        if (start) backends = await backendsOf(side);
        return { at, server: serverCpu, db: backends.reduce((sum, pid) => sum + (cpuSecondsOf(pid) ?? 0), 0), wal: together ? 0 : await walNow() };
      };
      const marks: { start?: Promise<Mark>; end?: Promise<Mark> } = {};
      const spec = specFor(kind, options, side.port, round, startsAt);
      const child = spawnChild(
        `load (${side.name}, ${spec.label})`,
        LOAD_CORE,
        ['--import', 'tsx', path.join(ROOT, 'test/bench/load.ts'), JSON.stringify(spec)],
        childEnv(),
        (line) => {
          if (line === '@@mark start') marks.start = mark(true);
          else if (line === '@@mark end') marks.end = marks.start ? marks.start.then(() => mark(false)) : mark(false);
        },
      );
      const stdout = await runToEnd(child, spec.warmupLimitMs + spec.durationMs + spec.timeoutMs + 60_000);
      const result = JSON.parse(stdout.trim().split('\n').pop() ?? '') as LoadResult;
      const first = marks.start ? await marks.start : null;
      const last = marks.end ? await marks.end : null;
      const requests = first && last ? result.requests : 0;
      const perRequest = (a: number | null | undefined, b: number | null | undefined, scale: number) =>
        a === null || a === undefined || b === null || b === undefined || requests === 0 ? null : ((b - a) * scale) / requests;
      return {
        requestsPerSecond: result.requestsPerSecond,
        serverCpuMsPerRequest: perRequest(first?.server, last?.server, 1000),
        dbCpuMsPerRequest: perRequest(first?.db, last?.db, 1000),
        walBytesPerRequest: together ? null : perRequest(first?.wal, last?.wal, 1),
        mix: result.mix,
      };
    }

    const results: Record<string, Record<Side['name'], Slice[]>> = {};
    for (let round = 0; round < options.rounds; round++) {
      for (const kind of options.only) {
        const order = round % 2 === 0 ? sides : [...sides].reverse();
        results[kind] ??= { this: [], other: [] };
        if (options.together) {
          await admin.query('CHECKPOINT');
          // Both windows open at one instant, after the warm-up; a poll pool is first polled through (as
          // load.ts waits for alone), which two sides sharing the machine take about twice as long to do.
          const warmupMs = kind === 'poll' ? Math.max(options.warmup * 1000, 16_000) : options.warmup * 1000;
          const startsAt = Date.now() + 1500 + warmupMs;
          // The side whose load starts first changes every round, as the order does when interleaved.
          const slices = await Promise.all(order.map((side) => slice(side, kind, round, startsAt)));
          const [mine, theirs] = order[0] === sides[0] ? slices : [...slices].reverse();
          results[kind].this.push(mine!);
          results[kind].other.push(theirs!);
          log(
            `round ${round + 1}/${options.rounds} ${kind} together: this ${mine!.requestsPerSecond.toFixed(0)} req/s, other ${theirs!.requestsPerSecond.toFixed(0)} req/s`,
          );
          continue;
        }
        for (const side of order) {
          const measured = await slice(side, kind, round);
          results[kind][side.name].push(measured);
          log(`round ${round + 1}/${options.rounds} ${kind} ${side.name}: ${measured.requestsPerSecond.toFixed(0)} req/s, ${JSON.stringify(measured.mix)}`);
        }
      }
    }
    report(options, results);
  } finally {
    await stopAllChildren();
    for (const side of sides) await admin.query(`DROP DATABASE IF EXISTS ${side.database} WITH (FORCE)`).catch(() => {});
    await admin.end();
    stopCluster();
  }
}

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
};

function report(options: AbOptions, results: Record<string, Record<Side['name'], Slice[]>>): void {
  const measures = [
    ['req/s', (slice: Slice) => slice.requestsPerSecond],
    ['server CPU ms/req', (slice: Slice) => slice.serverCpuMsPerRequest],
    ['db CPU ms/req', (slice: Slice) => slice.dbCpuMsPerRequest],
    ['WAL B/req', (slice: Slice) => slice.walBytesPerRequest],
  ] as const;
  const summary: Record<string, Record<string, { this: number; other: number; ratio: number; lowest: number; highest: number }>> = {};
  const lines = [
    `this (${options.this}) against other (${options.against}): ${options.rounds} rounds of ${options.seconds} s per side, ${options.together ? 'both sides at once' : 'AB then BA'}.`,
    "Each cell: median of this · median of other · median of the rounds' ratios this/other (lowest-highest).",
    '',
    `| scenario | ${measures.map(([name]) => name).join(' | ')} |`,
    `|---|${measures.map(() => '--:').join('|')}|`,
  ];
  for (const [kind, bySide] of Object.entries(results)) {
    summary[kind] = {};
    const cells = measures.map(([name, of]) => {
      const mine = bySide.this.map(of);
      const theirs = bySide.other.map(of);
      // A scenario that writes nothing has a WAL ratio of noise (a background write now and then): none is given under 1 B per request.
      const floor = name === 'WAL B/req' ? 1 : Number.MIN_VALUE;
      const ratios = mine.flatMap((value, round) => {
        const other = theirs[round];
        return value === null || other === null || other === undefined || other < floor ? [] : [value / other];
      });
      if (ratios.length === 0) return '';
      const entry = {
        this: median(mine.filter((v): v is number => v !== null)),
        other: median(theirs.filter((v): v is number => v !== null)),
        ratio: median(ratios),
        lowest: Math.min(...ratios),
        highest: Math.max(...ratios),
      };
      summary[kind]![name] = entry;
      const digits = name === 'req/s' || name === 'WAL B/req' ? 0 : 3;
      return `${entry.this.toFixed(digits)} · ${entry.other.toFixed(digits)} · ${entry.ratio.toFixed(3)} (${entry.lowest.toFixed(3)}-${entry.highest.toFixed(3)})`;
    });
    lines.push(`| ${kind} | ${cells.join(' | ')} |`);
  }
  process.stdout.write(`${lines.join('\n')}\n`);
  const file = path.resolve(ROOT, options.json);
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, `${JSON.stringify({ options, summary, results }, null, 2)}\n`);
  log(`results in ${file}`);
}

const deadline = setTimeout(() => {
  log('the run passed its 60-minute bound; stopping');
  killAllChildrenNow();
  process.exit(1);
}, 60 * 60_000);
deadline.unref();

main().then(
  () => process.exit(0),
  (error: unknown) => {
    log(error instanceof Error ? (error.stack ?? error.message) : String(error));
    killAllChildrenNow();
    process.exit(1);
  },
);
