import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';

import { runProgram } from './helpers/cli.js';
import { startServerProcess } from './helpers/server-process.js';
import { createTestDatabase } from './helpers/database.js';

// Each test starts real processes; on a busy 2-core machine one start can take several seconds.
vi.setConfig({ testTimeout: 120_000, hookTimeout: 120_000 });

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function tempDataDir(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'device-auth-server-'));
  dirs.push(dir);
  return dir;
}

describe('the server process', () => {
  it('serves with nothing but a data folder (embedded database), migrating at start, and stops cleanly on SIGTERM', async () => {
    const dataDir = tempDataDir();
    const server = await startServerProcess({ DATA_DIR: dataDir });
    const meta = await (await fetch(`${server.url}/.well-known/openid-configuration`)).json();
    // ISSUER defaults to http://localhost:PORT.
    expect(meta.issuer).toMatch(/^http:\/\/localhost:\d+$/);
    expect(await server.stop('SIGTERM')).toBe(0);
    expect(server.output()).toContain('device-auth ready');
  });

  it('SIGTERM lets in-flight requests finish, then exits 0', async () => {
    const server = await startServerProcess({
      DATA_DIR: tempDataDir(),
      LOG_LEVEL: 'info',
      RATE_LIMIT_SIGNIN_PER_ACCOUNT: 'off',
      RATE_LIMIT_SIGNIN_PER_ACCOUNT_IP: 'off',
      RATE_LIMIT_SIGNIN_PER_IP: 'off',
      // All twelve from one address, and all verified: the bounds are not what is tested here.
      PASSWORD_CHECKS_PER_IP: '12',
      PASSWORD_CHECKS_QUEUED: '12',
    });
    const page = await fetch(`${server.url}/signin`);
    const cookie = page.headers.getSetCookie()[0]!.split(';')[0]!;
    const csrf = /name="csrf_token" value="([^"]+)"/.exec(await page.text())![1]!;
    // Failed sign-ins are slow on purpose (argon2id), so they are still running when the signal lands.
    const requests = 12;
    const inFlight = Array.from({ length: requests }, () =>
      fetch(`${server.url}/signin`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', cookie },
        body: new URLSearchParams({ email: 'nobody@example.test', password: 'a long wrong password', csrf_token: csrf }),
      }).then((res) => res.status),
    );
    // Signal once the server has received every request (argon2id keeps most of them running).
    const received = () =>
      server
        .output()
        .split('\n')
        .filter((l) => l.includes('incoming request') && l.includes('"POST"')).length;
    for (let i = 0; i < 200 && received() < requests; i++) await new Promise((r) => setTimeout(r, 25));
    expect(received()).toBe(requests);
    const exit = server.stop('SIGTERM');
    const statuses = await Promise.all(inFlight);
    // Each got its real answer (wrong credentials), none a reset connection.
    expect(statuses).toEqual(Array(requests).fill(401));
    expect(await exit).toBe(0);
  });

  it('with its log reader gone the server keeps answering, and exits 0 within 10 s of SIGTERM', async () => {
    const server = await startServerProcess({ DATA_DIR: tempDataDir(), LOG_LEVEL: 'info' });
    server.child.stdout!.destroy();
    for (let i = 0; i < 20; i++) {
      const res = await fetch(`${server.url}/.well-known/openid-configuration`, { signal: AbortSignal.timeout(5_000) });
      expect(res.status).toBe(200);
    }
    const signalled = Date.now();
    expect(await server.stop('SIGTERM', 15_000)).toBe(0);
    expect(Date.now() - signalled).toBeLessThan(10_000);
  });

  it('SIGTERM while the log pipe is full, then its reader goes away (`npm start | tee log`, Ctrl-C): exits 0 within 10 s', async () => {
    const server = await startServerProcess({ DATA_DIR: tempDataDir(), LOG_LEVEL: 'info' });
    // The reader stalls; requests with long paths (each logged) fill the pipe's buffer (a few hundred KB) many times over.
    server.child.stdout!.pause();
    const longPath = `/${'x'.repeat(8_000)}`;
    const filling = Promise.allSettled(
      Array.from({ length: 64 }, () => fetch(`${server.url}${longPath}`, { signal: AbortSignal.timeout(20_000) }).then((res) => res.text())),
    );
    await new Promise((r) => setTimeout(r, 1_000));
    const exit = server.stop('SIGTERM', 20_000);
    await new Promise((r) => setTimeout(r, 1_000));
    const readerGone = Date.now();
    server.child.stdout!.destroy();
    // Before: the exit-time flush retried its failed write every 100 ms forever, and no signal could end it.
    expect(await exit).toBe(0);
    expect(Date.now() - readerGone).toBeLessThan(10_000);
    await filling;
  });

  it('serves on PostgreSQL when DATABASE_URL is set', async () => {
    if (!process.env.TEST_DATABASE_URL) {
      // Embedded runs prove the embedded default above; this case needs the server.
      expect(process.env.TEST_DATABASE_URL).toBeUndefined();
      return;
    }
    const database = await createTestDatabase();
    try {
      const server = await startServerProcess({ DATABASE_URL: database.url!, ISSUER: 'https://auth.example.test' });
      const meta = await (await fetch(`${server.url}/.well-known/openid-configuration`)).json();
      expect(meta.issuer).toBe('https://auth.example.test');
      expect(await server.stop('SIGTERM')).toBe(0);
    } finally {
      await database.drop();
    }
  });

  it('with MIGRATE_ON_START=false it does not migrate; `device-auth migrate` does', async () => {
    const dataDir = tempDataDir();
    await expect(startServerProcess({ DATA_DIR: dataDir, MIGRATE_ON_START: 'false' }, 10_000)).rejects.toThrow(/exited early|did not become ready/);
    const migrated = await runProgram(['migrate'], { DATA_DIR: dataDir });
    expect(migrated.code, migrated.stderr).toBe(0);
    const server = await startServerProcess({ DATA_DIR: dataDir, MIGRATE_ON_START: 'false' });
    expect(await server.stop()).toBe(0);
  });

  it.each([
    ['PORT', 'seventy'],
    ['ISSUER', 'ftp://auth.example'],
    ['DEVICE_CODE_TTL', '-5'],
    ['DEVICE_POLL_INTERVAL', '0'],
    ['ACCESS_TOKEN_TTL', 'soon'],
    ['REFRESH_TOKEN_TTL', '1.5'],
    ['LOG_LEVEL', 'loud'],
    ['DATABASE_URL', 'mysql://db/x'],
    ['KEY_ENCRYPTION_KEY', 'c2hvcnQ='],
    ['SIGNING_KEY_ROTATION_DAYS', '0'],
    ['JWKS_CACHE_SECONDS', 'forever'],
    // PostgreSQL without a key-encryption key: refused before connecting (the line names both).
    ['DATABASE_URL', 'postgres://127.0.0.1:1/nothing'],
    ['GEOIP_DATABASE', '/nonexistent/GeoLite2-City.mmdb'],
    // Readable, so only found wrong once opened, after the database: still one line.
    ['GEOIP_DATABASE', path.resolve('package.json')],
  ])('a bad %s (%s) stops the start with one line naming it and a non-zero exit', async (name, value) => {
    const res = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
      import('node:child_process').then(({ execFile }) => {
        execFile(
          process.execPath,
          ['--import', 'tsx', path.resolve('src/server.ts')],
          { env: { PATH: process.env.PATH, DATA_DIR: tempDataDir(), [name]: value }, timeout: 30_000 },
          (error, _stdout, stderr) => resolve({ code: error ? ((error.code as number) ?? 1) : 0, stderr }),
        );
      });
    });
    expect(res.code).not.toBe(0);
    const lines = res.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain(name);
  });
});
