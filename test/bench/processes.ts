import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** Child processes of the benchmark: pinned to a core when taskset exists, all stopped on the way out. */

/** The checkout: children run from here, so `--import tsx` resolves. */
export const ROOT = fileURLToPath(new URL('../../', import.meta.url));

export const TASKSET = ['/usr/bin/taskset', '/bin/taskset'].find((path) => existsSync(path)) ?? null;
export const pinning = TASKSET !== null;

/** The core the server and the ceilings run on, and the load generator's. */
export const SERVER_CORE = 0;
export const LOAD_CORE = 1;

export interface Child {
  name: string;
  process: ChildProcess;
  pid: number;
  /** The last 64 KiB the process wrote on stdout and stderr. */
  output(): string;
  exited: Promise<number | null>;
}

const children = new Set<Child>();
const TAIL = 64 * 1024;

export function spawnChild(name: string, core: number | null, args: string[], env: Record<string, string>, onStderrLine?: (line: string) => void): Child {
  const command = core !== null && TASKSET ? [TASKSET, '-c', String(core), process.execPath, ...args] : [process.execPath, ...args];
  const proc = spawn(command[0]!, command.slice(1), { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  if (proc.pid === undefined) throw new Error(`could not start ${name}`);
  let tail = '';
  let partial = '';
  const keep = (chunk: Buffer) => {
    tail = (tail + chunk.toString('utf8')).slice(-TAIL);
  };
  proc.stdout?.on('data', keep);
  proc.stderr?.on('data', (chunk: Buffer) => {
    keep(chunk);
    if (!onStderrLine) return;
    partial += chunk.toString('utf8');
    const lines = partial.split('\n');
    partial = lines.pop() ?? '';
    for (const line of lines) onStderrLine(line);
  });
  const exited = new Promise<number | null>((resolve) => proc.once('exit', (code, signal) => resolve(signal ? null : code)));
  const child: Child = { name, process: proc, pid: proc.pid, output: () => tail, exited };
  children.add(child);
  void exited.then(() => children.delete(child));
  return child;
}

/** SIGTERM, then SIGKILL after `graceMs`. */
export async function stopChild(child: Child, graceMs = 5000): Promise<void> {
  if (child.process.exitCode !== null || child.process.signalCode !== null) return;
  child.process.kill('SIGTERM');
  const timeout = new Promise<'timeout'>((resolve) => setTimeout(() => resolve('timeout'), graceMs).unref());
  if ((await Promise.race([child.exited, timeout])) === 'timeout') {
    child.process.kill('SIGKILL');
    await child.exited;
  }
}

export async function stopAllChildren(): Promise<void> {
  await Promise.all([...children].map((child) => stopChild(child)));
}

/** Synchronous last resort (process 'exit'): no child outlives the benchmark. */
export function killAllChildrenNow(): void {
  for (const child of children) {
    if (child.process.exitCode === null && child.process.signalCode === null) child.process.kill('SIGKILL');
  }
}

/** Waits until GET url answers 200, while the child lives. */
export async function waitForHttp(child: Child, url: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (child.process.exitCode !== null || child.process.signalCode !== null) {
      throw new Error(`${child.name} exited before it was ready:\n${child.output()}`);
    }
    try {
      const response = await fetch(url);
      if (response.ok) return;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`${child.name} was not ready within ${timeoutMs} ms:\n${child.output()}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** Resident memory from /proc/PID/status, in MiB: now (VmRSS) and the peak so far (VmHWM). */
export function memoryOf(pid: number): { rssMb: number; peakMb: number } | null {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN);
    return { rssMb: kb('VmRSS') / 1024, peakMb: kb('VmHWM') / 1024 };
  } catch {
    return null;
  }
}

let ticksPerSecond: number | null = null;

/** CPU seconds (user + system) a process has used, from /proc/PID/stat; null once it is gone. */
export function cpuSecondsOf(pid: number): number | null {
  ticksPerSecond ??= (() => {
    try {
      return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    } catch {
      return 100;
    }
  })();
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name, which is in parentheses and may hold spaces.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / ticksPerSecond;
  } catch {
    return null;
  }
}

/** Runs a short-lived child to its end and returns its stdout; throws on failure or past `boundMs`. */
export async function runToEnd(child: Child, boundMs: number): Promise<string> {
  let stdout = '';
  child.process.stdout?.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
  const timedOut = new Promise<'timeout'>((resolve) => setTimeout(() => resolve('timeout'), boundMs).unref());
  const code = await Promise.race([child.exited, timedOut]);
  if (code === 'timeout') {
    await stopChild(child);
    throw new Error(`${child.name} did not finish within ${boundMs} ms:\n${child.output()}`);
  }
  if (code !== 0) throw new Error(`${child.name} failed (${String(code)}):\n${child.output()}`);
  return stdout;
}
