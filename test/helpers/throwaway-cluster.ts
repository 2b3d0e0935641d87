import { execFile, execFileSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { connectDatabase } from '../../src/db/connect.js';
import { migrateToLatest } from '../../src/db/migrate.js';
import type { TestDatabase } from './database.js';
import { freePort } from './server-process.js';

/** Where Debian and Ubuntu put the PostgreSQL 15 server programs (initdb, pg_ctl). */
export const POSTGRES_BIN = '/usr/lib/postgresql/15/bin';

export const postgresBinariesPresent = (): boolean => existsSync(path.join(POSTGRES_BIN, 'initdb'));

/**
 * A PostgreSQL cluster of the test's own, in a temporary folder, that the test may stop and
 * start (the machine's server must never be touched). It listens on loopback only, on a free port.
 */
export interface ThrowawayCluster {
  port: number;
  /** postgres:// URL (TCP on 127.0.0.1) of a database on this cluster. */
  url(database?: string): string;
  createDatabase(name: string): Promise<string>;
  start(): Promise<void>;
  /** fast: backends are told to stop and sessions end cleanly; immediate: a crash, recovered at the next start. */
  stop(mode: 'fast' | 'immediate'): Promise<void>;
  /** Stops it (immediate) if it runs and removes its folder; safe to call twice. */
  destroy(): Promise<void>;
}

const TIMEOUT_MS = 60_000;
const live = new Set<() => void>();
let exitHookInstalled = false;

/** initdb refuses to run as root: as root the programs run as the postgres OS user. */
function asClusterOwner(program: string, args: string[]): [string, string[]] {
  const binary = path.join(POSTGRES_BIN, program);
  return process.getuid?.() === 0 ? ['runuser', ['-u', 'postgres', '--', binary, ...args]] : [binary, args];
}

function run(program: string, args: string[], logFile?: string): Promise<string> {
  const [command, argv] = asClusterOwner(program, args);
  return new Promise((resolve, reject) => {
    execFile(command, argv, { timeout: TIMEOUT_MS, env: { PATH: process.env.PATH, LANG: 'C' } }, (error, stdout, stderr) => {
      if (!error) return resolve(stdout);
      const log = logFile && existsSync(logFile) ? readFileSync(logFile, 'utf8').slice(-2000) : '';
      reject(new Error(`${program} ${args.join(' ')} failed: ${error.message}\n${stdout}\n${stderr}\n${log}`));
    });
  });
}

export interface ThrowawayClusterOptions {
  /**
   * pg_hba.conf rules placed before initdb's, which trust everyone: a rule such as
   * `host all app 127.0.0.1/32 scram-sha-256` makes one role prove its password.
   */
  hbaRules?: string[];
}

export async function createThrowawayCluster(options: ThrowawayClusterOptions = {}): Promise<ThrowawayCluster> {
  if (!postgresBinariesPresent()) throw new Error(`no PostgreSQL server programs in ${POSTGRES_BIN}`);
  const root = mkdtempSync(path.join(tmpdir(), 'device-auth-pg-'));
  if (process.getuid?.() === 0) {
    const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
    const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
    chownSync(root, uid, gid);
  }
  const dataDir = path.join(root, 'data');
  const logFile = path.join(root, 'postgres.log');
  const port = await freePort();
  let running = false;
  let destroyed = false;

  // If the worker dies before destroy(), leave no server behind.
  const emergencyStop = () => {
    try {
      if (running) execFileSync(...asClusterOwner('pg_ctl', ['-D', dataDir, '-m', 'immediate', '-w', '-t', '10', 'stop']), { stdio: 'ignore' });
    } catch {
      // already gone
    }
    rmSync(root, { recursive: true, force: true });
  };
  live.add(emergencyStop);
  if (!exitHookInstalled) {
    exitHookInstalled = true;
    process.once('exit', () => {
      for (const stop of live) stop();
    });
  }

  const url = (database = 'postgres') => `postgres://postgres@127.0.0.1:${port}/${database}`;
  const cluster: ThrowawayCluster = {
    port,
    url,
    async createDatabase(name) {
      const admin = new pg.Client({ connectionString: url() });
      await admin.connect();
      try {
        await admin.query(`CREATE DATABASE ${name}`);
      } finally {
        await admin.end();
      }
      return url(name);
    },
    async start() {
      // -l: the server writes to a file, so it never holds on to our pipes.
      const options = `-p ${port} -k ${root} -c listen_addresses=127.0.0.1 -c fsync=off`;
      await run('pg_ctl', ['-D', dataDir, '-o', options, '-l', logFile, '-w', '-t', '30', 'start'], logFile);
      running = true;
    },
    async stop(mode) {
      await run('pg_ctl', ['-D', dataDir, '-m', mode, '-w', '-t', '30', 'stop'], logFile);
      running = false;
    },
    async destroy() {
      if (destroyed) return;
      destroyed = true;
      live.delete(emergencyStop);
      try {
        if (running) await cluster.stop('immediate');
      } finally {
        rmSync(root, { recursive: true, force: true });
      }
    },
  };

  try {
    await run('initdb', ['-D', dataDir, '-A', 'trust', '-U', 'postgres', '--no-sync', '-E', 'UTF8', '--locale=C']);
    if (options.hbaRules?.length) {
      // Written in place, so the file keeps its owner (the postgres OS user when we are root).
      const hba = path.join(dataDir, 'pg_hba.conf');
      writeFileSync(hba, `${options.hbaRules.join('\n')}\n${readFileSync(hba, 'utf8')}`);
    }
    await cluster.start();
  } catch (error) {
    await cluster.destroy().catch(() => {});
    throw error;
  }
  return cluster;
}

/** A migrated database on a throwaway cluster of its own; drop() removes the whole cluster. */
export async function createClusterDatabase(): Promise<TestDatabase & { url: string; cluster: ThrowawayCluster }> {
  const cluster = await createThrowawayCluster();
  try {
    const url = await cluster.createDatabase('device_auth');
    const handle = await connectDatabase({ databaseUrl: url, dataDir: 'unused', poolSize: 2 });
    await migrateToLatest(handle.db);
    return {
      handle,
      url,
      cluster,
      async drop() {
        try {
          await handle.close();
        } finally {
          await cluster.destroy();
        }
      },
    };
  } catch (error) {
    await cluster.destroy();
    throw error;
  }
}
