import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { connectDatabase } from '../../src/db/connect.js';
import { DataDirInUse } from '../../src/db/data-dir-lock.js';
import { runProgram } from '../helpers/cli.js';
import { freePort, startServerProcess } from '../helpers/server-process.js';

/**
 * Issue 19 §1: only one process ever opens an embedded DATA_DIR; a second one is refused with the
 * folder and the holder named, having written nothing; a lock left by a crash does not block.
 * These run whatever database the suite uses: the embedded database is always there.
 */

const SERVER = fileURLToPath(new URL('../../src/server.ts', import.meta.url));
/**
 * Each test starts two or three real server processes through tsx; on a 2-core machine running the
 * rest of the suite beside them, one start has taken over 20 s, so these bounds are generous.
 */
const PROCESS_BOUND_MS = 90_000;
const TEST_BOUND_MS = 4 * PROCESS_BOUND_MS;
const folders: string[] = [];
function tempDataDir(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'device-auth-lock-'));
  folders.push(dir);
  return dir;
}
afterAll(() => {
  for (const dir of folders) rmSync(dir, { recursive: true, force: true });
});

/** Every file of the folder with its size and modification time, but the lock itself. */
function snapshot(dir: string): string[] {
  const files: string[] = [];
  const walk = (at: string) => {
    for (const entry of readdirSync(at, { withFileTypes: true })) {
      const full = path.join(at, entry.name);
      if (entry.isDirectory()) walk(full);
      else if (entry.name !== 'device-auth.lock') {
        const stat = statSync(full);
        files.push(`${path.relative(dir, full)} ${stat.size} ${stat.mtimeMs}`);
      }
    }
  };
  walk(dir);
  return files.sort();
}

/** Runs a second server process to its end (bounded): its exit code and what it printed. */
async function secondServer(dataDir: string): Promise<{ code: number | null; output: string }> {
  const port = await freePort();
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', SERVER], {
      env: { PATH: process.env.PATH, HOST: '127.0.0.1', PORT: String(port), DATA_DIR: dataDir, LOG_LEVEL: 'info' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (chunk) => (output += chunk));
    child.stderr.on('data', (chunk) => (output += chunk));
    const bound = setTimeout(() => child.kill('SIGKILL'), PROCESS_BOUND_MS);
    child.once('exit', (code) => {
      clearTimeout(bound);
      resolve({ code, output });
    });
  });
}

describe('one owner per embedded database', () => {
  it(
    'a second server, and a CLI command that would open the database itself, on a DATA_DIR a server holds are refused, naming the folder and the holder, having written nothing',
    async () => {
      const dataDir = tempDataDir();
      const first = await startServerProcess({ DATA_DIR: dataDir }, PROCESS_BOUND_MS);
      try {
        const before = snapshot(dataDir);
        const second = await secondServer(dataDir);
        expect(second.code).not.toBe(0);
        expect(second.output).toContain(`the embedded database in ${dataDir} is in use by process ${first.child.pid}`);

        // A command that opens the database itself is refused the same way...
        const migrate = await runProgram(['migrate'], { DATA_DIR: dataDir });
        expect(migrate.code).not.toBe(0);
        expect(migrate.stderr).toContain(`the embedded database in ${dataDir} is in use by process ${first.child.pid}`);
        expect(snapshot(dataDir)).toEqual(before);
        // ...while the others go through the running server's admin socket (test/cli/server-running.test.ts).
        // The first is untouched and still serves.
        expect((await fetch(`${first.url}/readyz`)).status).toBe(200);
        expect(JSON.parse(readFileSync(path.join(dataDir, 'device-auth.lock'), 'utf8')).pid).toBe(first.child.pid);
      } finally {
        expect(await first.stop('SIGTERM')).toBe(0);
      }
      // A clean stop leaves no lock, and the folder opens again.
      expect(existsSync(path.join(dataDir, 'device-auth.lock'))).toBe(false);
      const users = await runProgram(['user', 'list'], { DATA_DIR: dataDir });
      expect(users.stderr).not.toContain('in use');
    },
    TEST_BOUND_MS,
  );

  it(
    'a lock left by a crashed server does not block the next start',
    async () => {
      const dataDir = tempDataDir();
      const crashed = await startServerProcess({ DATA_DIR: dataDir }, PROCESS_BOUND_MS);
      expect(await crashed.stop('SIGKILL')).toBeNull();
      expect(existsSync(path.join(dataDir, 'device-auth.lock'))).toBe(true);
      const next = await startServerProcess({ DATA_DIR: dataDir }, PROCESS_BOUND_MS);
      try {
        expect((await fetch(`${next.url}/readyz`)).status).toBe(200);
        expect(JSON.parse(readFileSync(path.join(dataDir, 'device-auth.lock'), 'utf8')).pid).toBe(next.child.pid);
      } finally {
        expect(await next.stop('SIGTERM')).toBe(0);
      }
    },
    TEST_BOUND_MS,
  );

  it('a lock naming a pid that now belongs to another process (pid reuse) does not block either', async () => {
    const dataDir = tempDataDir();
    // This test process is alive, but did not start at the time the lock says.
    writeFileSync(path.join(dataDir, 'device-auth.lock'), JSON.stringify({ pid: process.pid, host: (await import('node:os')).hostname(), processStart: '1' }));
    const handle = await connectDatabase({ dataDir });
    await handle.close();
  });

  it('within one process, a second open of the same folder is refused until the first is closed', async () => {
    const dataDir = tempDataDir();
    const first = await connectDatabase({ dataDir });
    await expect(connectDatabase({ dataDir })).rejects.toBeInstanceOf(DataDirInUse);
    await first.close();
    const again = await connectDatabase({ dataDir });
    await again.close();
  });
});
