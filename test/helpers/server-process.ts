import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import { TEST_KEY_ENCRYPTION_KEY } from './app.js';

const SERVER = fileURLToPath(new URL('../../src/server.ts', import.meta.url));

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

export interface ServerProcess {
  child: ChildProcess;
  url: string;
  output(): string;
  /** Sends a signal and resolves with the exit code, or null if it had to be killed after the bound. */
  stop(signal?: NodeJS.Signals, boundMs?: number): Promise<number | null>;
}

/**
 * Starts the real server (src/server.ts through tsx) on loopback and waits until it answers. A
 * start compiles through tsx, loads the location data and, embedded, opens PGlite: on two cores
 * busy with the rest of the suite that has taken more than 30 s, so the bound is 90 s.
 */
export async function startServerProcess(env: Record<string, string>, readyTimeoutMs = 90_000): Promise<ServerProcess> {
  const port = env.PORT ? Number(env.PORT) : await freePort();
  const child = spawn(process.execPath, ['--import', 'tsx', SERVER], {
    env: { PATH: process.env.PATH, HOST: '127.0.0.1', PORT: String(port), LOG_LEVEL: 'info', KEY_ENCRYPTION_KEY: TEST_KEY_ENCRYPTION_KEY, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout?.on('data', (chunk) => (output += chunk));
  child.stderr?.on('data', (chunk) => (output += chunk));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const url = `http://127.0.0.1:${port}`;

  const deadline = Date.now() + readyTimeoutMs;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`server exited early (${child.exitCode}):\n${output}`);
    try {
      const res = await fetch(`${url}/.well-known/openid-configuration`);
      if (res.ok) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`server did not become ready:\n${output}`);
    }
    await new Promise((r) => setTimeout(r, 200));
  }

  return {
    child,
    url,
    output: () => output,
    async stop(signal = 'SIGTERM', boundMs = 15_000) {
      if (child.exitCode !== null) return child.exitCode;
      child.kill(signal);
      const timer = new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), boundMs).unref());
      const result = await Promise.race([exited, timer]);
      if (result === 'timeout') {
        child.kill('SIGKILL');
        return null;
      }
      return result;
    },
  };
}
