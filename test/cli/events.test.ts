import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';

import { banUser } from '../../src/accounts/bans.js';
import { revokeGrants } from '../../src/oauth/grant-revocation.js';
import { migrateToLatest } from '../../src/db/migrate.js';
import { seedClient, seedUser, startTestApp } from '../helpers/app.js';
import { BIN, createCliTarget, runProgram, type CliTarget } from '../helpers/cli.js';
import { createTestDatabase } from '../helpers/database.js';
import { freePort, startServerProcess } from '../helpers/server-process.js';
import { TEST_KEY_ENCRYPTION_KEY } from '../helpers/app.js';
import { grantOf, refresh, refreshed, revoke, signIn } from '../helpers/tokens.js';

// Each test starts real processes; on a busy 2-core machine one start can take several seconds.
vi.setConfig({ testTimeout: 120_000, hookTimeout: 120_000 });

let target: CliTarget;
let email: string;

/** Lives a user's devices through every kind of ending, then lets the CLI read the history. */
beforeAll(async () => {
  target = await createCliTarget();
  const handle = await target.open();
  await migrateToLatest(handle.db);
  const database = { handle, url: null, drop: () => handle.close() };
  const t = await startTestApp({ database });
  try {
    const tv = await seedClient(t, { kind: 'tv', name: 'Living Room TV' });
    const user = await seedUser(t);
    email = user.email;
    const stolen = await signIn(t, tv, user.userId);
    await refreshed(t, tv, stolen.refresh_token!);
    t.clock.advance(t.config.refreshRetryWindow + 1);
    await refresh(t, tv, stolen.refresh_token!); // replay after the retry window: reuse detected
    const revoked = await signIn(t, tv, user.userId);
    await revoke(t, tv, revoked.access_token);
    const signedOut = await signIn(t, tv, user.userId);
    const signedOutGrant = (await grantOf(t, signedOut.access_token)).grant_id;
    await t.deps.db
      .transaction()
      .execute((trx) => revokeGrants(trx, { grantId: signedOutGrant }, 'signed_out_by_user', { now: t.clock.now(), ip: '203.0.113.7' }));
    await signIn(t, tv, user.userId);
    await t.deps.db
      .transaction()
      .execute((trx) => revokeGrants(trx, { userId: user.userId, clientId: tv.clientId }, 'access_removed', { now: t.clock.now(), ip: '203.0.113.8' }));
    await signIn(t, tv, user.userId);
    await banUser(t.deps.db, user.email, t.clock.now());
  } finally {
    await t.close();
    await database.drop();
  }
});
afterAll(() => target.cleanup());

describe('device-auth events --user EMAIL', () => {
  it('prints every lifecycle event of the user as JSON lines, with time, reason and client IP', async () => {
    const res = await runProgram(['events', '--user', email], target.env);
    expect(res.code, res.stderr).toBe(0);
    const events = res.stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line));
    const summary = events.map((e) => `${e.type}${e.reason ? `:${e.reason}` : ''}`);
    expect(summary).toEqual([
      'user.created',
      'device_request.approved',
      'grant.issued:device_code',
      'grant.rotated',
      'grant.revoked:reuse_detected',
      'device_request.approved',
      'grant.issued:device_code',
      'grant.revoked:revoked_by_app',
      'device_request.approved',
      'grant.issued:device_code',
      'grant.revoked:signed_out_by_user',
      'device_request.approved',
      'grant.issued:device_code',
      'grant.revoked:access_removed',
      'device_request.approved',
      'grant.issued:device_code',
      'grant.revoked:user_banned',
      'user.banned',
    ]);
    for (const e of events) expect(e.at).toMatch(/^\d{4}-\d\d-\d\dT/);
    for (const e of events.filter((e) => e.client_id !== null)) expect(e.app).toBe('Living Room TV');
    for (const e of events.filter((e) => e.type.startsWith('grant.'))) expect(e.grant_id).toEqual(expect.any(String));
    // Requests over HTTP record the caller's IP.
    expect(events.find((e) => e.type === 'grant.issued').client_ip).toBe('127.0.0.1');
    expect(events.find((e) => e.reason === 'signed_out_by_user').client_ip).toBe('203.0.113.7');
  });

  it('an unknown user is an error on stderr', async () => {
    const res = await runProgram(['events', '--user', 'nobody@example.test'], target.env);
    expect(res.code).toBe(2);
    expect(res.stderr).toContain('no user');
  });
});

describe('device-auth events --follow', () => {
  it("tails a running server's events as they commit, filtered, and ends on Ctrl-C (SIGINT) with exit 0", async () => {
    // The server's storage in this suite's mode; the CLI reaches it only through ADMIN_URL.
    const database = process.env.TEST_DATABASE_URL ? await createTestDatabase() : null;
    const folder = mkdtempSync(path.join(tmpdir(), 'device-auth-follow-'));
    const storage: Record<string, string> = database ? { DATABASE_URL: database.url! } : { DATA_DIR: path.join(folder, 'data') };
    const token = 'follow-admin-token-0123456789abcdef0123';
    const adminPort = await freePort();
    const server = await startServerProcess({ ...storage, ADMIN_TOKEN: token, ADMIN_PORT: String(adminPort) });
    const remote = {
      ADMIN_URL: `http://127.0.0.1:${adminPort}`,
      ADMIN_TOKEN: token,
      KEY_ENCRYPTION_KEY: TEST_KEY_ENCRYPTION_KEY,
      DATA_DIR: path.join(folder, 'none'),
    };
    const follower = spawn(process.execPath, [BIN, 'events', '--follow', '--type', 'user.created,app.created'], {
      env: { PATH: process.env.PATH, ...remote },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    follower.stdout.on('data', (chunk) => (stdout += chunk));
    follower.stderr.on('data', (chunk) => (stderr += chunk));
    const exited = new Promise<number | null>((resolve) => follower.once('exit', (code) => resolve(code)));
    const killer = setTimeout(() => follower.kill('SIGKILL'), 110_000);
    try {
      /** Waits, at most `ms`, until the follower has printed `lines` lines. */
      const printed = async (lines: number, ms: number) => {
        const deadline = Date.now() + ms;
        for (let turn = 0; turn < 1_000 && stdout.split('\n').filter(Boolean).length < lines; turn++) {
          if (Date.now() > deadline || follower.exitCode !== null) throw new Error(`the follower printed ${JSON.stringify(stdout)} (${stderr})`);
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
      };
      // It says on stderr when it follows: from then on nothing is missed.
      const deadline = Date.now() + 60_000;
      for (let turn = 0; turn < 1_000 && !stderr.includes('following events'); turn++) {
        if (Date.now() > deadline || follower.exitCode !== null) throw new Error(`the follower did not start: ${stderr}`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      const user = await runProgram(['user', 'create', '--email', 'followed@example.test'], remote, 60_000, 'a long enough password\n');
      expect(user.code, user.stderr).toBe(0);
      const app = await runProgram(['client', 'create', '--name', 'Followed TV', '--kind', 'tv', '--type', 'public'], remote, 60_000);
      expect(app.code, app.stderr).toBe(0);
      // Not of the types asked for: not printed.
      expect((await runProgram(['user', 'ban', 'followed@example.test'], remote, 60_000)).code).toBe(0);
      await printed(2, 30_000);
      follower.kill('SIGINT');
      const timer = new Promise<'timeout'>((resolve) => setTimeout(() => resolve('timeout'), 10_000).unref());
      expect(await Promise.race([exited, timer])).toBe(0);
      const events = stdout
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line));
      expect(events.map((e) => e.type)).toEqual(['user.created', 'app.created']);
      expect(events[0]).toMatchObject({ user_id: JSON.parse(user.stdout).user_id, actor: { kind: 'admin', via: 'token', address: '127.0.0.1' } });
      expect(events[1]).toMatchObject({ client_id: JSON.parse(app.stdout).client_id });
      expect(stderr).toBe(`device-auth: following events from the admin API at ${remote.ADMIN_URL} (Ctrl-C to stop)\n`);
      // The server stops at once, nothing held open by the follower.
      expect(await server.stop('SIGTERM', 20_000)).toBe(0);
    } finally {
      clearTimeout(killer);
      follower.kill('SIGKILL');
      await server.stop('SIGKILL');
      await database?.drop();
      rmSync(folder, { recursive: true, force: true });
    }
  });
});
