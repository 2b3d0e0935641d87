/**
 * Issue 31 §3, measured: a bulk revocation of one grant in ten (those asked from CAMPAIGN_ASN)
 * while the poll and refresh loads run beside it. Not part of `npm run bench` nor of CI: it takes
 * a PostgreSQL server of its own choosing and minutes at full scale.
 *
 *   node --import tsx test/bench/bulk-revoke.ts --database-url postgres://postgres@127.0.0.1:5432/postgres \
 *     [--grants 1000000] [--seconds 20] [--connections 16]
 *
 * It creates a database of its own on that server (dropped at the end), seeds the benchmark's data
 * set (test/bench/seed.ts: every tenth grant from CAMPAIGN_ASN), starts the server from source
 * (tsx, not the build: no `npm run build` needed), then runs poll and refresh side by side twice
 * for --seconds each: once alone, once with POST /admin/grants/revoke {"asn": [CAMPAIGN_ASN]}
 * fired a second in. It prints one JSON document: the revocation's time and count, and each
 * load's throughput and p99 in both runs. The refresh load rotates grants the revocation spares.
 */
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { connectDatabase } from '../../src/db/connect.js';
import { migrateToLatest } from '../../src/db/migrate.js';
import { freePort } from '../helpers/server-process.js';
import { ROOT, spawnChild, stopAllChildren, waitForHttp, type Child } from './processes.js';
import type { LoadKind, LoadResult, LoadSpec } from './scenarios.js';
import { CAMPAIGN_ASN, seed } from './seed.js';

const { values } = parseArgs({
  options: {
    'database-url': { type: 'string' },
    grants: { type: 'string', default: '1000000' },
    seconds: { type: 'string', default: '20' },
    connections: { type: 'string', default: '16' },
  },
});
const adminUrl = values['database-url'] ?? process.env.BENCH_DATABASE_URL;
if (!adminUrl) throw new Error('--database-url (or BENCH_DATABASE_URL): any database of the PostgreSQL server to run on');
const grants = Number(values.grants);
const seconds = Number(values.seconds);
const connections = Number(values.connections);
const pending = Math.min(grants, 20_000);

const ADMIN_TOKEN = randomBytes(24).toString('hex');
const KEY_ENCRYPTION_KEY = randomBytes(32).toString('base64');
const env = (extra: Record<string, string>) => ({ PATH: process.env.PATH ?? '/usr/bin:/bin', NODE_ENV: 'production', KEY_ENCRYPTION_KEY, ...extra });
const log = (line: string) => process.stderr.write(`${line}\n`);

function runToEnd(child: Child): Promise<string> {
  let stdout = '';
  child.process.stdout?.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
  return child.exited.then((code) => {
    if (code !== 0) throw new Error(`${child.name} exited with ${code}:\n${child.output()}`);
    return stdout;
  });
}

function load(kind: LoadKind, port: number, label: string): Promise<LoadResult> {
  // The refresh load rotates grants the revocation spares (i % 10 != 0), so that its throughput is what is measured.
  const refreshGrants = Array.from({ length: connections * 4 }, (_, k) => k * 10 + 1);
  const spec: LoadSpec = {
    label,
    kind,
    host: '127.0.0.1',
    port,
    connections: Math.max(1, Math.floor(connections / 2)),
    warmupMs: 2000,
    warmupLimitMs: 2000,
    durationMs: seconds * 1000,
    maxRequests: 10_000_000,
    timeoutMs: 30_000,
    rows: { offset: 0, count: pending, stride: 1 },
    grants,
    refreshGrants,
    intervalMs: 1000,
    timeline: false,
  };
  const child = spawnChild(`load (${label})`, null, ['--import', 'tsx', path.join(ROOT, 'test/bench/load.ts'), JSON.stringify(spec)], env({}));
  return runToEnd(child).then((stdout) => JSON.parse(stdout.trim().split('\n').pop() ?? '') as LoadResult);
}

const summary = (r: LoadResult) => ({ requestsPerSecond: Math.round(r.requestsPerSecond), p99Ms: r.p99Ms, mix: r.mix });

const name = `bench_bulk_revoke_${process.pid}`;
const admin = new pg.Client({ connectionString: adminUrl });
await admin.connect();
await admin.query(`CREATE DATABASE ${name}`);
const url = new URL(adminUrl);
url.pathname = `/${name}`;
try {
  const handle = await connectDatabase({ databaseUrl: url.toString(), dataDir: 'unused', poolSize: 4 });
  await migrateToLatest(handle.db);
  await handle.close();
  const seeding = new pg.Client({ connectionString: url.toString() });
  await seeding.connect();
  await seeding.query('SET session_replication_role = replica');
  const seededAt = performance.now();
  await seed((text) => seeding.query(text).then(() => undefined), { pending: 0, grants: 0, codes: 0 }, { pending, grants, codes: 0 }, 0, log);
  await seeding.query('VACUUM ANALYZE');
  await seeding.end();
  log(`seeded ${grants} grants in ${((performance.now() - seededAt) / 1000).toFixed(1)} s`);

  const [port, adminPort] = [await freePort(), await freePort()];
  const server = spawnChild(
    'server',
    null,
    ['--import', 'tsx', path.join(ROOT, 'src/server.ts')],
    env({
      LOG_LEVEL: 'warn',
      HOST: '127.0.0.1',
      PORT: String(port),
      ISSUER: `http://127.0.0.1:${port}`,
      DATABASE_URL: url.toString(),
      DATABASE_POOL_SIZE: '10',
      DEVICE_POLL_INTERVAL: '1',
      PURGE_INTERVAL: '0',
      ADMIN_TOKEN,
      ADMIN_PORT: String(adminPort),
      RATE_LIMIT_DEVICE_CODE_PER_IP: '100000000/60',
      RATE_LIMIT_TOKEN_PER_CLIENT: '100000000/60',
      RATE_LIMIT_TOKEN_PER_IP: '100000000/60',
    }),
  );
  await waitForHttp(server, `http://127.0.0.1:${port}/readyz`, 120_000);

  log('poll and refresh, alone');
  const [pollAlone, refreshAlone] = await Promise.all([load('poll', port, 'poll alone'), load('refresh', port, 'refresh alone')]);

  log('poll and refresh, with the bulk revocation');
  const beside = Promise.all([load('poll', port, 'poll beside'), load('refresh', port, 'refresh beside')]);
  await new Promise((resolve) => setTimeout(resolve, 3000));
  const startedAt = performance.now();
  const res = await fetch(`http://127.0.0.1:${adminPort}/admin/grants/revoke`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ asn: [CAMPAIGN_ASN] }),
  });
  const revocationSeconds = (performance.now() - startedAt) / 1000;
  const answer = (await res.json()) as { revoked?: number };
  const [pollBeside, refreshBeside] = await beside;

  process.stdout.write(
    `${JSON.stringify(
      {
        grants,
        revoked: answer.revoked ?? answer,
        revocationSeconds: Number(revocationSeconds.toFixed(2)),
        revocationOutlastedTheLoad: revocationSeconds > seconds,
        poll: { alone: summary(pollAlone), beside: summary(pollBeside) },
        refresh: { alone: summary(refreshAlone), beside: summary(refreshBeside) },
      },
      null,
      2,
    )}\n`,
  );
} finally {
  await stopAllChildren();
  await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  await admin.end();
}
