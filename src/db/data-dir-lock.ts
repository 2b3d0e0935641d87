import { closeSync, linkSync, openSync, readFileSync, unlinkSync, writeSync } from 'node:fs';
import { hostname } from 'node:os';
import path from 'node:path';

/**
 * One owner per embedded database. PGlite keeps its whole database in one process's memory and
 * writes its files back from there: a second process on the same DATA_DIR (a second server, a
 * CLI command while the server runs) would work on its own copy and its writes would be lost, or
 * would overwrite the first's. So opening a DATA_DIR takes DATA_DIR/device-auth.lock, holding the
 * owner's pid, and a second opener is refused before it reads or writes anything.
 *
 * A lock whose process no longer runs (a crash, kill -9, a power cut) is stale and taken over. A
 * takeover goes through a second lock file of its own, so two processes starting at once after a
 * crash cannot both take the stale lock.
 */

export class DataDirInUse extends Error {
  constructor(
    readonly dataDir: string,
    readonly owner: LockOwner,
  ) {
    const since = owner.startedAt ? `, since ${owner.startedAt}` : '';
    const what = owner.command ? ` (${owner.command}${since})` : since ? ` (${since.slice(2)})` : '';
    super(
      `the embedded database in ${dataDir} is in use by process ${owner.pid} on ${owner.host}${what}: ` +
        'only one process may open it at a time. Stop that process first, or, with a server running, use its admin API.',
    );
  }
}

export interface LockOwner {
  pid: number;
  host: string;
  startedAt?: string;
  command?: string;
  /** Linux: the process's start time in clock ticks since boot, so a reused pid is not taken for the owner. */
  processStart?: string;
}

export interface DataDirLock {
  release(): void;
}

const LOCK_FILE = 'device-auth.lock';
const TAKEOVER_FILE = 'device-auth.lock.takeover';

/** Field 22 of /proc/PID/stat (after the command name, which may hold spaces and parentheses). */
function processStart(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
  } catch {
    return undefined;
  }
}

function isRunning(owner: LockOwner): boolean {
  // Another machine's process (a shared folder) cannot be checked from here: taken as running.
  if (owner.host !== hostname()) return true;
  try {
    process.kill(owner.pid, 0);
  } catch (error) {
    // EPERM: the process exists but belongs to someone else.
    if ((error as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  const started = processStart(owner.pid);
  return owner.processStart === undefined || started === undefined || started === owner.processStart;
}

function readOwner(file: string): LockOwner | null {
  try {
    const owner = JSON.parse(readFileSync(file, 'utf8')) as Partial<LockOwner>;
    if (typeof owner.pid !== 'number' || typeof owner.host !== 'string') return null;
    return owner as LockOwner;
  } catch {
    return null;
  }
}

/** Creates `file` holding `owner`, atomically: false if it exists. Written whole before it appears. */
function createExclusive(file: string, owner: LockOwner): boolean {
  const draft = `${file}.${process.pid}.${Date.now()}`;
  const fd = openSync(draft, 'wx', 0o600);
  try {
    writeSync(fd, JSON.stringify(owner));
  } finally {
    closeSync(fd);
  }
  try {
    linkSync(draft, file);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw error;
  } finally {
    unlinkSync(draft);
  }
}

function removeIfStale(file: string): void {
  const owner = readOwner(file);
  if (owner === null || !isRunning(owner)) {
    try {
      unlinkSync(file);
    } catch {
      // Gone already.
    }
  }
}

export function lockDataDir(
  dataDir: string,
  command = process.argv
    .slice(1)
    .map((a) => path.basename(a))
    .join(' ')
    .slice(0, 200),
): DataDirLock {
  const lockFile = path.join(dataDir, LOCK_FILE);
  const takeoverFile = path.join(dataDir, TAKEOVER_FILE);
  const me: LockOwner = {
    pid: process.pid,
    host: hostname(),
    startedAt: new Date().toISOString(),
    command,
    ...(processStart(process.pid) ? { processStart: processStart(process.pid) } : {}),
  };
  if (!createExclusive(lockFile, me)) {
    const owner = readOwner(lockFile);
    if (owner && isRunning(owner)) throw new DataDirInUse(dataDir, owner);
    // Stale. Take it over under the takeover lock, checking again once that is held.
    removeIfStale(takeoverFile);
    if (!createExclusive(takeoverFile, me)) throw new DataDirInUse(dataDir, readOwner(takeoverFile) ?? me);
    try {
      removeIfStale(lockFile);
      if (!createExclusive(lockFile, me)) throw new DataDirInUse(dataDir, readOwner(lockFile) ?? me);
    } finally {
      unlinkSync(takeoverFile);
    }
  }
  let held = true;
  const release = () => {
    if (!held) return;
    held = false;
    process.removeListener('exit', release);
    // Only our own lock: never one a later owner took over.
    if (readOwner(lockFile)?.pid === process.pid) {
      try {
        unlinkSync(lockFile);
      } catch {
        // Gone already.
      }
    }
  };
  // process.exit() skips close(): the lock goes with the process all the same.
  process.on('exit', release);
  return { release };
}

/** The process holding the folder's embedded database now, if any (a stale lock holds nothing). */
export function dataDirOwner(dataDir: string): LockOwner | null {
  const owner = readOwner(path.join(dataDir, LOCK_FILE));
  return owner && isRunning(owner) ? owner : null;
}
