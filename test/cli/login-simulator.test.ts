import { spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';

import { seedClient, seedUser, startTestApp, type TestApp } from '../helpers/app.js';
import { BIN } from '../helpers/cli.js';
import { simulateDeviceLogin } from '../../src/cli/login.js';
import { decide } from '../helpers/device.js';
import { freePort } from '../helpers/server-process.js';

// Each test starts real processes; on a busy 2-core machine one start can take several seconds.
vi.setConfig({ testTimeout: 120_000, hookTimeout: 120_000 });

let t: TestApp;
let issuer: string;
let user: { userId: string };

beforeAll(async () => {
  const port = await freePort();
  issuer = `http://127.0.0.1:${port}`;
  // The simulator follows the discovery document, so the issuer must be where the server listens.
  t = await startTestApp({ realTime: true, env: { DEVICE_POLL_INTERVAL: '1', ISSUER: issuer } });
  await t.app.listen({ port, host: '127.0.0.1' });
  user = await seedUser(t);
});
afterAll(() => t.close());

interface Run {
  screen: Promise<string>;
  done: Promise<{ code: number | null; stdout: string; stderr: string }>;
}

/** Runs `device-auth login` and hands back the user code as soon as the "TV" shows it. */
function runLogin(args: string[], options: { env?: Record<string, string>; stdin?: string } = {}): Run & { userCode: Promise<string>; argv: string[] } {
  const child = spawn(process.execPath, [BIN, 'login', ...args], {
    env: { PATH: process.env.PATH, ...options.env },
    stdio: [options.stdin === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
  });
  if (options.stdin !== undefined) child.stdin!.end(options.stdin);
  let stdout = '';
  let stderr = '';
  let resolveCode: (code: string) => void;
  const userCode = new Promise<string>((r) => (resolveCode = r));
  child.stdout!.on('data', (c) => (stdout += c));
  child.stderr!.on('data', (c) => {
    stderr += c;
    const match = /enter the code:\s+([A-Z]{4}-[A-Z]{4})/.exec(stderr);
    if (match?.[1]) resolveCode(match[1]);
  });
  const killer = setTimeout(() => child.kill('SIGKILL'), 60_000);
  const done = new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) =>
    child.on('exit', (code) => {
      clearTimeout(killer);
      resolve({ code, stdout, stderr });
    }),
  );
  return { userCode, screen: done.then(() => stderr), done, argv: child.spawnargs };
}

describe('device-auth login (device simulator)', () => {
  it('shows the code, the URI, the phrase and a QR code, polls, and prints the tokens when approved', async () => {
    const { clientId } = await seedClient(t);
    const run = runLogin(['--client', clientId, '--issuer', issuer, '--scope', 'openid profile offline_access']);
    const userCode = await run.userCode;
    expect(await decide(t, userCode, user.userId, 'approve')).toBe('approved');
    const result = await run.done;
    expect(result.code, result.stderr).toBe(0);
    expect(result.stderr).toContain(`${issuer}/activate`);
    expect(result.stderr).toContain('device-auth simulator, pretending to be a TV');
    expect(result.stderr).toMatch(/pick this phrase:\s+[A-Z][a-z]+[A-Z][a-z]+/);
    // The QR code is drawn with block characters.
    expect(result.stderr).toMatch(/[▀▄█]/);
    const tokens = JSON.parse(result.stdout);
    expect(tokens).toMatchObject({ token_type: 'Bearer', access_token: expect.stringMatching(/^da_at_/), refresh_token: expect.stringMatching(/^da_rt_/) });
  });

  it('--dpop binds the code and tokens to a fresh key: token_type DPoP, and userinfo answers the bound token', async () => {
    const { clientId } = await seedClient(t);
    const run = runLogin(['--client', clientId, '--issuer', issuer, '--scope', 'openid offline_access', '--dpop']);
    const userCode = await run.userCode;
    const request = await t.deps.db.selectFrom('device_requests').select('dpop_jkt').where('client_id', '=', clientId).executeTakeFirstOrThrow();
    expect(request.dpop_jkt).toMatch(/^[A-Za-z0-9_-]{43}$/);
    await decide(t, userCode, user.userId, 'approve');
    const result = await run.done;
    expect(result.code, result.stderr).toBe(0);
    expect(result.stderr).toContain(`Userinfo with the DPoP-bound token: sub ${user.userId}`);
    expect(JSON.parse(result.stdout)).toMatchObject({ token_type: 'DPoP' });
  });

  it.each([
    ['the variable named by --secret-env', (secret: string) => ({ args: ['--secret-env', 'BOT_SECRET'], env: { BOT_SECRET: secret } })],
    ['standard input with --secret-stdin', (secret: string) => ({ args: ['--secret-stdin'], stdin: `${secret}\n` })],
  ])('authenticates a confidential bot with its secret from %s, never in argv', async (_name, pass) => {
    const { clientId, clientSecret } = await seedClient(t, { kind: 'bot', type: 'confidential' });
    const how = pass(clientSecret!);
    const run = runLogin(['--client', clientId, ...how.args, '--issuer', issuer], how);
    expect(run.argv.join(' ')).not.toContain(clientSecret);
    const userCode = await run.userCode;
    await decide(t, userCode, user.userId, 'approve');
    const result = await run.done;
    expect(result.code, result.stderr).toBe(0);
    expect(result.stderr).toContain(`${issuer}/activate/bot`);
    expect(result.stderr).toContain('device-auth simulator, pretending to be a bot');
  });

  it('stops with the reason when the user denies', async () => {
    const { clientId } = await seedClient(t);
    const run = runLogin(['--client', clientId, '--issuer', issuer]);
    await decide(t, await run.userCode, user.userId, 'deny');
    const result = await run.done;
    expect(result.code).not.toBe(0);
    expect(result.stdout).toBe('');
    expect(result.stderr).toContain('denied');
  });

  it('stops with the reason when the phrase picked was wrong', async () => {
    const { clientId } = await seedClient(t);
    const run = runLogin(['--client', clientId, '--issuer', issuer]);
    await decide(t, await run.userCode, user.userId, 'wrong_phrase');
    const result = await run.done;
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain('confirmation phrase');
  });

  it('stops with the reason when the code expires', async () => {
    const { clientId } = await seedClient(t);
    const run = runLogin(['--client', clientId, '--issuer', issuer]);
    await run.userCode;
    t.clock.advance(601);
    const result = await run.done;
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain('expired');
  });

  it('honours slow_down: each one adds 5 seconds to this and every later wait', async () => {
    const { clientId } = await seedClient(t);
    const waits: number[] = [];
    let userCode = '';
    const tokens = await simulateDeviceLogin({
      issuer,
      clientId,
      screen: (text) => {
        userCode ||= /enter the code:\s+([A-Z]{4}-[A-Z]{4})/.exec(text)?.[1] ?? '';
      },
      // The first two waits are cut short, so the server answers slow_down twice.
      sleep: async (seconds) => {
        waits.push(seconds);
        if (waits.length >= 3) t.clock.advance(seconds);
        if (waits.length === 4) await decide(t, userCode, user.userId, 'approve');
      },
    });
    expect(waits).toEqual([1, 6, 11, 11]);
    expect(tokens.access_token).toMatch(/^da_at_/);
  });

  it('with no --issuer and no running server to ask, the error names the address it tried and says to pass --issuer', async () => {
    const nothingThere = await freePort();
    const result = await runLogin(['--client', 'tv_anything'], { env: { PORT: String(nothingThere), DATA_DIR: `/tmp/device-auth-no-server-${nothingThere}` } })
      .done;
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(`cannot reach the server at http://localhost:${nothingThere}`);
    expect(result.stderr).toContain('Pass --issuer');
  });

  it("an unknown client is refused with the server's reason", async () => {
    const result = await runLogin(['--client', 'tv_nobody', '--issuer', issuer]).done;
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain('invalid_client');
  });
});
