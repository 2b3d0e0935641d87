import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { seedClient, seedUser, startTestApp, type TestApp } from '../helpers/app.js';
import { freePort } from '../helpers/server-process.js';
import { approveOverHttp, introspectOverHttp, signInOverHttp, WebBrowser } from '../helpers/web.js';

/**
 * Issue 29 §7: the real oidc-agent (Debian's oidc-agent-cli, 4.2.6 when written) against the
 * server on loopback, configured from the discovery document: the device flow with a public
 * client (HTTP Basic `client_id:` with an empty password, §2) and a confidential one, both
 * registered without the confirmation phrase (§1), the agent's refresh once the access token has
 * expired, and revocation when the account configuration is deleted. oidc-agent accepts a plain
 * http issuer on 127.0.0.1, so no certificate is needed. .ci/run installs oidc-agent-cli; without
 * it this file fails rather than skips.
 */

vi.setConfig({ testTimeout: 120_000, hookTimeout: 120_000 });

/** Seconds an access token lives here: short, so that the agent must refresh within the test. */
const ACCESS_TOKEN_TTL = 3;
const ENCRYPTION_PASSWORD = 'oidc-agent test password';
const SCOPE = 'openid profile offline_access';

let t: TestApp;
let issuer: string;
let user: { userId: string; email: string; password: string };
let resourceServer: { clientId: string; clientSecret: string | null };
let home: string;
let agent: { socket: string; pid: number };

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** One oidc-agent command in the test's own HOME and agent, bounded in time. */
function oidc(command: string, args: string[], timeoutMs = 60_000): Promise<Run> {
  return new Promise((resolve) => {
    execFile(command, args, { env: agentEnv(), timeout: timeoutMs }, (error, stdout, stderr) => {
      resolve({ code: error ? (typeof error.code === 'number' ? error.code : 1) : 0, stdout, stderr });
    });
  });
}

const agentEnv = () => ({ PATH: process.env.PATH, HOME: home, OIDC_SOCK: agent?.socket ?? '', TMPDIR: home });

beforeAll(async () => {
  const port = await freePort();
  issuer = `http://127.0.0.1:${port}`;
  t = await startTestApp({ realTime: true, env: { ISSUER: issuer, DEVICE_POLL_INTERVAL: '1', ACCESS_TOKEN_TTL: String(ACCESS_TOKEN_TTL) } });
  await t.app.listen({ port, host: '127.0.0.1' });
  user = await seedUser(t);
  resourceServer = await seedClient(t, { kind: 'web', type: 'confidential', name: 'Photo API' });
  home = mkdtempSync(path.join(tmpdir(), 'device-auth-oidc-agent-'));
  const started = await oidc('oidc-agent', ['--json', '--quiet']);
  expect(started.code, started.stderr).toBe(0);
  const { socket, dpid } = JSON.parse(started.stdout) as { socket: string; dpid: string };
  agent = { socket, pid: Number(dpid) };
});

afterAll(async () => {
  if (agent) process.kill(agent.pid, 'SIGTERM');
  await t?.close();
  if (home) rmSync(home, { recursive: true, force: true });
});

/**
 * `oidc-gen --flow=device` for an account, non-interactively: it shows the code, the user
 * approves it on the server's pages over HTTP, and oidc-gen saves the account once it has tokens.
 */
async function generateAccount(
  account: string,
  client: { clientId: string; clientSecret: string | null },
  page: '/activate' | '/activate/bot',
): Promise<Run & { userCode: string }> {
  const child = spawn(
    'oidc-gen',
    [
      account,
      '--flow=device',
      `--iss=${issuer}`,
      `--client-id=${client.clientId}`,
      // A public client's secret is empty: oidc-agent then sends HTTP Basic `client_id:`.
      `--client-secret=${client.clientSecret ?? ''}`,
      `--scope=${SCOPE}`,
      '--no-url-call',
      '--prompt=none',
      '--confirm-default',
      `--pw-cmd=echo '${ENCRYPTION_PASSWORD}'`,
    ],
    { env: agentEnv(), stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let stdout = '';
  let stderr = '';
  let shownCode: (code: string) => void;
  const codeShown = new Promise<string>((resolve) => (shownCode = resolve));
  const onOutput = () => {
    const code = /enter the code:\s*([A-Z]{4}-[A-Z]{4})/.exec(stdout + stderr)?.[1];
    if (code) shownCode(code);
  };
  child.stdout.on('data', (chunk) => {
    stdout += chunk;
    onOutput();
  });
  child.stderr.on('data', (chunk) => {
    stderr += chunk;
    onOutput();
  });
  const killer = setTimeout(() => child.kill('SIGKILL'), 90_000);
  const exited = new Promise<number | null>((resolve) =>
    child.on('exit', (code) => {
      clearTimeout(killer);
      resolve(code);
    }),
  );
  const userCode = await Promise.race([codeShown, exited.then(() => '')]);
  expect(userCode, `oidc-gen showed no code:\n${stdout}\n${stderr}`).not.toBe('');

  const browser = new WebBrowser(issuer);
  await signInOverHttp(browser, user);
  // No phrase: these apps are registered without one, as oidc-agent shows none.
  const decided = await approveOverHttp(browser, userCode, '', { page });
  expect(decided.body).toContain('is now connected to your account');
  const code = await exited;
  return { code, stdout, stderr, userCode };
}

async function accessToken(account: string, ...options: string[]): Promise<string> {
  const run = await oidc('oidc-token', [...options, account]);
  expect(run.code, `${run.stdout}\n${run.stderr}`).toBe(0);
  return run.stdout.trim();
}

async function introspect(token: string) {
  const res = await introspectOverHttp(issuer, resourceServer, token);
  expect(res.status, res.body).toBe(200);
  return res.json<{ active: boolean; client_id?: string; sub?: string }>();
}

const grantsOf = (clientId: string) =>
  t.deps.db.selectFrom('grants').select(['grant_id', 'revoked_at', 'revoked_reason']).where('client_id', '=', clientId).execute();

describe.each([
  ['a public client (HTTP Basic with an empty password)', 'public'],
  ['a confidential client (HTTP Basic with its secret)', 'confidential'],
] as const)('oidc-agent with %s', (_name, type) => {
  let client: { clientId: string; clientSecret: string | null };
  const account = `device-auth-${type}`;

  beforeAll(async () => {
    client = await seedClient(t, { kind: type === 'public' ? 'tv' : 'bot', type, name: `oidc-agent ${type}`, confirmationPhrase: false });
  });

  it('oidc-gen --flow=device signs in through the device flow and oidc-token hands out a live access token', async () => {
    const generated = await generateAccount(account, client, type === 'public' ? '/activate' : '/activate/bot');
    expect(generated.code, `${generated.stdout}\n${generated.stderr}`).toBe(0);
    const token = await accessToken(account);
    expect(token).toMatch(/^da_at_/);
    expect(await introspect(token)).toMatchObject({ active: true, client_id: client.clientId, sub: user.userId });
  });

  it('after the access token expires, the agent refreshes it: a new, live token from the same grant', async () => {
    const before = await accessToken(account);
    await sleep((ACCESS_TOKEN_TTL + 1) * 1000);
    expect(await introspect(before)).toEqual({ active: false });
    const after = await accessToken(account);
    expect(after).not.toBe(before);
    expect(await introspect(after)).toMatchObject({ active: true, client_id: client.clientId });
    const grants = await grantsOf(client.clientId);
    expect(grants).toHaveLength(1);
    const refreshed = await t.deps.db.selectFrom('refresh_tokens').select('token_hash').where('grant_id', '=', grants[0]!.grant_id).execute();
    // The first refresh token and at least one successor: the agent used the refresh grant.
    expect(refreshed.length).toBeGreaterThanOrEqual(2);
  });

  it('deleting the account configuration (oidc-gen -d) revokes the grant at the revocation endpoint', async () => {
    const token = await accessToken(account);
    // --confirm-yes answers its "revoke the refresh token?" (the default answer keeps it).
    const deleted = await oidc('oidc-gen', ['-d', account, `--pw-cmd=echo '${ENCRYPTION_PASSWORD}'`, '--prompt=none', '--confirm-yes']);
    expect(deleted.code, `${deleted.stdout}\n${deleted.stderr}`).toBe(0);
    expect(await grantsOf(client.clientId)).toEqual([expect.objectContaining({ revoked_reason: 'revoked_by_app', revoked_at: expect.any(Date) })]);
    expect(await introspect(token)).toEqual({ active: false });
  });
});
