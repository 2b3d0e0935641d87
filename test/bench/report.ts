import { renderProfiles, type ProfileSummary } from './profile-summary.js';
import type { LoadKind, LoadResult } from './scenarios.js';

/** Results of a run, as written to JSON and rendered as markdown. */

export type DatabaseKind = 'postgres' | 'embedded';

export interface ScenarioRecord {
  /** Stable name for comparisons between runs: `poll`, `poll@scale`, `embedded:refresh`, ... */
  id: string;
  scenario: string;
  kind: LoadKind;
  database: DatabaseKind;
  /** Live device requests and live grants in the database when it ran. */
  rows: number;
  result: LoadResult;
  /** CPU of the process under load (server or ceilings) during the measured window, share of one core. */
  serverCpu: number | null;
  /** CPU of the database backends of this run (PostgreSQL) during the measured window. */
  dbCpu: number | null;
  /**
   * WAL bytes and full-page images written per second of the measured window, checkpoints begun in
   * it, and the tables an autovacuum worker worked on in it (PostgreSQL).
   */
  wal?: { bytes: number; fullPageImages: number; checkpoints?: number; autovacuumed?: string[] } | null;
  /** Resident memory of the process under load at the end of the window (VmRSS) and its peak so far (VmHWM), MiB. */
  memory: { rssMb: number; peakMb: number } | null;
  vsForm: number | null;
  /** × the mean of every UPDATE ceiling of the phase. */
  vsUpdate: number | null;
  /** × the mean of the UPDATE ceilings just before and after this scenario, where both ran (absent in older runs). */
  vsNeighbourUpdates?: number | null;
}

export interface MemoryRecord {
  database: DatabaseKind;
  peakMb: number;
  afterMb: number;
}

export interface ServerLog {
  database: DatabaseKind;
  lines: number;
  /** Where the whole output went, relative to the checkout. */
  file: string;
  first: string;
}

export interface Verdict {
  name: string;
  value: string;
  goal: string;
  pass: boolean;
}

export interface RunResults {
  version: 1;
  date: string;
  commit: string | null;
  mode: 'full' | 'quick' | 'soak' | 'quick soak';
  machine: Record<string, string | number | boolean>;
  settings: Record<string, string | number | boolean>;
  scenarios: ScenarioRecord[];
  rs256OpsPerSecond: number | null;
  memory: MemoryRecord[];
  serverLogs?: ServerLog[];
  soak: { minutes: Array<{ minute: number; requestsPerSecond: number; p99Ms: number; rssMb: number }> } | null;
  /** With --profile: where each scenario's server CPU went. */
  profiles?: ProfileSummary[];
  targets: Verdict[];
  checks: Verdict[];
}

const int = (n: number) => Math.round(n).toLocaleString('en');
const ms = (n: number) => (n >= 100 ? n.toFixed(0) : n >= 10 ? n.toFixed(1) : n.toFixed(2));
const ratio = (n: number | null) => (n === null ? '' : n.toFixed(2));
const share = (n: number | null) => (n === null ? '' : n.toFixed(2));

function formatMix(mix: Record<string, number>): string {
  const total = Object.values(mix).reduce((a, b) => a + b, 0);
  const percent = (count: number) => {
    if (count === total) return '100%';
    const p = (100 * count) / total;
    if (p < 0.1) return '<0.1%';
    if (p > 99.9) return '>99.9%';
    return `${p.toFixed(1).replace(/\.0$/, '')}%`;
  };
  return Object.entries(mix)
    .sort((a, b) => b[1] - a[1])
    .map(([key, count]) => `${key} ${percent(count)}`)
    .join(', ');
}

/** CPU milliseconds per request, from a share of one core and a rate. */
const perRequest = (cores: number | null, perSecond: number) => (cores === null || perSecond <= 0 ? '' : ((1000 * cores) / perSecond).toFixed(3));

const walPerRequest = (perSecond: number | undefined, rate: number, digits: number) =>
  perSecond === undefined || !Number.isFinite(perSecond) || rate <= 0 ? '' : (perSecond / rate).toFixed(digits);

function scenarioTable(records: ScenarioRecord[]): string {
  const lines = [
    '| scenario | rows | req/s | p50 ms | p99 ms | × form | × UPDATE | server CPU | server CPU ms/req | db CPU ms/req | WAL B/req | full pages/req | load CPU | RSS MB | responses |',
    '|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|',
  ];
  for (const r of records) {
    const rate = r.result.requestsPerSecond;
    lines.push(
      `| ${r.scenario} | ${int(r.rows)} | ${int(rate)} | ${ms(r.result.p50Ms)} | ${ms(r.result.p99Ms)} | ${ratio(r.vsForm)} | ${ratio(r.vsUpdate)} | ${share(r.serverCpu)} | ${perRequest(r.serverCpu, rate)} | ${perRequest(r.dbCpu, rate)} | ${walPerRequest(r.wal?.bytes, rate, 0)} | ${walPerRequest(r.wal?.fullPageImages, rate, 2)} | ${share(r.result.loadCpu)} | ${r.memory ? r.memory.rssMb.toFixed(0) : ''} | ${formatMix(r.result.mix)}${r.result.waitsForDueCode > 0 ? ' (pool-bound: waited for a due code)' : ''}${r.result.poolCycledInWarmup === false ? ' (warm-up ended before every code was polled once)' : ''}${r.result.poolExhausted ? ' (every authorization code was redeemed: the window was cut short)' : ''}${r.wal?.checkpoints ? ' (a checkpoint began in the measured window)' : ''}${r.wal?.autovacuumed?.length ? ` (autovacuum in the measured window: ${r.wal.autovacuumed.join(', ')})` : ''} |`,
    );
  }
  return lines.join('\n');
}

function verdictLines(title: string, verdicts: Verdict[]): string {
  if (verdicts.length === 0) return '';
  return [`${title}:`, ...verdicts.map((v) => `  ${v.pass ? 'PASS' : 'FAIL'}  ${v.name}: ${v.value} (goal ${v.goal})`)].join('\n');
}

export function renderMarkdown(results: RunResults, baseline: RunResults | null): string {
  const parts: string[] = [];
  const postgres = results.scenarios.filter((r) => r.database === 'postgres');
  const embedded = results.scenarios.filter((r) => r.database === 'embedded');
  if (postgres.length > 0) parts.push(`### PostgreSQL\n\n${scenarioTable(postgres)}`);
  if (embedded.length > 0) {
    parts.push(
      `### Embedded database (PGlite), no targets\n\n${scenarioTable(embedded)}\n\nThe UPDATE ceiling here runs on an embedded database of its own; the database works inside the server process, so its CPU is in the server's.`,
    );
  }
  if (results.soak) {
    const rows = results.soak.minutes.map((m) => `| ${m.minute + 1} | ${int(m.requestsPerSecond)} | ${ms(m.p99Ms)} | ${m.rssMb.toFixed(1)} |`);
    parts.push(['### Soak: well-behaved polls, by minute', '', '| minute | req/s | p99 ms | server RSS MB |', '|--:|--:|--:|--:|', ...rows].join('\n'));
  }
  const extras: string[] = [];
  if (results.rs256OpsPerSecond !== null) {
    const openid = results.scenarios.find((r) => r.id === 'refresh-openid');
    const of = openid ? `; refresh with openid runs at ${(openid.result.requestsPerSecond / results.rs256OpsPerSecond).toFixed(2)} of it` : '';
    extras.push(`RS256 signature alone (jose SignJWT, 2048-bit key, one core): ${int(results.rs256OpsPerSecond)}/s${of}.`);
  }
  for (const m of results.memory) {
    extras.push(`Server RSS (${m.database}): peak ${m.peakMb.toFixed(1)} MB during the run, ${m.afterMb.toFixed(1)} MB after it.`);
  }
  for (const log of results.serverLogs ?? []) {
    extras.push(`Server log (${log.database}, warnings and errors): ${log.lines} lines in ${log.file}; the first: \`${log.first.replace(/`/g, "'")}\``);
  }
  if (extras.length > 0) parts.push(extras.join('\n'));
  if (baseline) parts.push(compareTable(results, baseline));
  const targetsTitle = results.mode.startsWith('quick') ? 'Targets (not enforced in --quick: a few seconds per scenario)' : 'Targets';
  const verdicts = [verdictLines(targetsTitle, results.targets), verdictLines('Checks', results.checks)].filter(Boolean);
  if (verdicts.length > 0) parts.push(['```', ...verdicts, '```'].join('\n'));
  parts.push(
    `Machine: ${Object.entries(results.machine)
      .map(([k, v]) => `${k} ${String(v)}`)
      .join('; ')}.\nSettings: ${Object.entries(results.settings)
      .map(([k, v]) => `${k} ${String(v)}`)
      .join('; ')}.`,
  );
  if (results.profiles && results.profiles.length > 0) parts.push(renderProfiles(results.profiles));
  return `${parts.join('\n\n')}\n`;
}

/** Ratios to the UPDATE ceiling against a previous run's: absolute figures drift, ratios less. */
function compareTable(results: RunResults, baseline: RunResults): string {
  const before = new Map(baseline.scenarios.map((r) => [r.id, r]));
  const lines = [
    `### Against the baseline (${baseline.commit?.slice(0, 12) ?? 'unknown commit'}, ${baseline.date})`,
    '',
    '| scenario | × UPDATE then | × UPDATE now | change | p99 ms then | p99 ms now |',
    '|---|--:|--:|--:|--:|--:|',
  ];
  for (const r of results.scenarios) {
    const b = before.get(r.id);
    if (!b || r.vsUpdate === null || b.vsUpdate === null) continue;
    const change = b.vsUpdate > 0 ? `${((100 * (r.vsUpdate - b.vsUpdate)) / b.vsUpdate).toFixed(0)}%` : '';
    lines.push(`| ${r.id} | ${ratio(b.vsUpdate)} | ${ratio(r.vsUpdate)} | ${change} | ${ms(b.result.p99Ms)} | ${ms(r.result.p99Ms)} |`);
  }
  return lines.join('\n');
}
