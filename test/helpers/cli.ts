import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { connectDatabase, type DatabaseHandle } from '../../src/db/connect.js';
import { TEST_KEY_ENCRYPTION_KEY } from './app.js';
import { createTestDatabase, type TestDatabase } from './database.js';

export const BIN = fileURLToPath(new URL('../../bin/device-auth.js', import.meta.url));

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
  /** The command line the process was started with, as ps shows it. */
  argv: string[];
}

/**
 * Runs the real `device-auth` program in a child process; `stdin` is its whole standard input (a
 * pipe, not a terminal). It has the tests' key-encryption key unless `env` says otherwise
 * (`KEY_ENCRYPTION_KEY: undefined` leaves it out).
 */
export function runProgram(args: string[], env: Record<string, string | undefined>, timeoutMs = 60_000, stdin: string | Buffer = ''): Promise<CliResult> {
  return new Promise((resolve) => {
    const child = execFile(
      process.execPath,
      [BIN, ...args],
      { env: { PATH: process.env.PATH, KEY_ENCRYPTION_KEY: TEST_KEY_ENCRYPTION_KEY, ...env }, timeout: timeoutMs },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === 'number' ? error.code : 1) : 0;
        resolve({ code, stdout, stderr, argv: child.spawnargs });
      },
    );
    child.stdin?.end(stdin);
  });
}

/**
 * Where the CLI writes: the test's PostgreSQL database when TEST_DATABASE_URL is set, otherwise
 * an embedded database in a temporary folder. `open()` inspects it once the CLI has exited
 * (the embedded database has one owner at a time).
 */
export interface CliTarget {
  env: Record<string, string>;
  open(): Promise<DatabaseHandle>;
  cleanup(): Promise<void>;
}

export async function createCliTarget(): Promise<CliTarget> {
  if (process.env.TEST_DATABASE_URL) {
    const database: TestDatabase = await createTestDatabase();
    return {
      env: { DATABASE_URL: database.url!, KEY_ENCRYPTION_KEY: TEST_KEY_ENCRYPTION_KEY },
      open: async () => connectDatabase({ databaseUrl: database.url!, dataDir: 'unused', poolSize: 2 }),
      cleanup: () => database.drop(),
    };
  }
  const dir = mkdtempSync(path.join(tmpdir(), 'device-auth-cli-'));
  return {
    env: { DATA_DIR: dir, KEY_ENCRYPTION_KEY: TEST_KEY_ENCRYPTION_KEY },
    open: () => connectDatabase({ dataDir: dir }),
    cleanup: async () => rmSync(dir, { recursive: true, force: true }),
  };
}
