import { execFileSync } from 'node:child_process';
import { appendFileSync, chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort } from '../helpers/server-process.js';

/**
 * A PostgreSQL cluster of the benchmark's own, configured as the PostgreSQL manual advises for a
 * database server: shared_buffers a quarter of the machine's memory ("a reasonable starting value
 * ... is 25% of the memory in your system"), every other setting at its default, durability
 * included (fsync, synchronous_commit, full_page_writes).
 *
 * Why not the machine's server: its shared_buffers is whatever it was left at, 128 MB by default,
 * less than the 1,000,000-row data set's working set. A poll at that scale then reads its row's
 * page from the kernel and writes another dirty page back first, which measures the cache size,
 * not the server: pgbench of the poll statement cycling through the pool read 0.99 heap pages per
 * poll from outside a 128 MB cache, against none at 20,000 rows (figures in docs/benchmarks.md).
 * BENCH_DATABASE_URL still runs the benchmark on any server instead.
 */
export interface Cluster {
  /** A database URL of the cluster (its `postgres` database), on 127.0.0.1. */
  url: string;
  /** What the report says about it. */
  description: string;
  stop(): void;
}

/** Where initdb and pg_ctl are: BENCH_POSTGRES_BIN, pg_config --bindir, the newest Debian install, or PATH. */
export function findPostgresBin(): string | null {
  const hasTools = (dir: string) => existsSync(path.join(dir, 'initdb')) && existsSync(path.join(dir, 'pg_ctl'));
  const fromEnv = process.env.BENCH_POSTGRES_BIN;
  if (fromEnv) {
    if (!hasTools(fromEnv)) throw new Error(`BENCH_POSTGRES_BIN=${fromEnv} holds no initdb and pg_ctl`);
    return fromEnv;
  }
  try {
    const dir = execFileSync('pg_config', ['--bindir'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    if (hasTools(dir)) return dir;
  } catch {
    // no pg_config
  }
  const debian = '/usr/lib/postgresql';
  if (existsSync(debian)) {
    const newest = readdirSync(debian)
      .filter((version) => /^\d+$/.test(version))
      .sort((a, b) => Number(b) - Number(a))
      .map((version) => path.join(debian, version, 'bin'))
      .find(hasTools);
    if (newest) return newest;
  }
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    if (dir && hasTools(dir)) return dir;
  }
  return null;
}

/** shared_buffers in MB: a quarter of the memory, at least the default 128 MB. */
function sharedBuffersMb(totalBytes = os.totalmem()): number {
  return Math.max(128, Math.floor(totalBytes / 4 / 2 ** 20));
}

/**
 * initdb and start a cluster in a temporary directory, listening on 127.0.0.1 only, with trust
 * authentication (the data is the benchmark's and thrown away). initdb refuses to run as root,
 * so as root the cluster belongs to the `postgres` user.
 */
export async function startCluster(bin: string, log: (line: string) => void): Promise<Cluster> {
  const asRoot = process.getuid?.() === 0;
  const dir = mkdtempSync(path.join(os.tmpdir(), 'device-auth-bench-pg-'));
  const data = path.join(dir, 'data');
  const run = (tool: string, args: string[]) => {
    const command = asRoot ? ['runuser', '-u', 'postgres', '--', path.join(bin, tool), ...args] : [path.join(bin, tool), ...args];
    return execFileSync(command[0]!, command.slice(1), { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 120_000 });
  };
  const removeDir = () => rmSync(dir, { recursive: true, force: true });
  try {
    if (asRoot) {
      const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
      const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
      chownSync(dir, uid, gid);
    }
    run('initdb', ['-D', data, '-U', 'postgres', '-A', 'trust', '-E', 'UTF8', '--no-sync']);
    const port = await freePort();
    const buffersMb = sharedBuffersMb();
    appendFileSync(
      path.join(data, 'postgresql.conf'),
      `\n# device-auth benchmark\nport = ${port}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '${dir}'\nshared_buffers = ${buffersMb}MB\n`,
    );
    run('pg_ctl', ['-D', data, '-l', path.join(dir, 'server.log'), '-w', '-t', '60', 'start']);
    log(`own PostgreSQL cluster in ${dir} on 127.0.0.1:${port}, shared_buffers ${buffersMb} MB`);
    let stopped = false;
    return {
      url: `postgres://postgres@127.0.0.1:${port}/postgres`,
      description: `the benchmark's own cluster (${bin}): shared_buffers ${buffersMb} MB, a quarter of the memory; every other setting at its default`,
      stop: () => {
        if (stopped) return;
        stopped = true;
        try {
          // Immediate: the data is thrown away, so the shutdown checkpoint would only write gigabytes for nothing.
          run('pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop']);
        } finally {
          removeDir();
        }
      },
    };
  } catch (error) {
    try {
      run('pg_ctl', ['-D', data, '-m', 'immediate', 'stop']);
    } catch {
      // never started
    }
    removeDir();
    throw error;
  }
}

/** The URL of another database of the same server. */
export function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}
