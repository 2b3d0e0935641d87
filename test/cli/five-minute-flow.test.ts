import { TEST_KEY_ENCRYPTION_KEY } from '../helpers/app.js';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { BIN, runProgram } from '../helpers/cli.js';
import { createTestDatabase, type TestDatabase } from '../helpers/database.js';
import { freePort, startServerProcess, type ServerProcess } from '../helpers/server-process.js';
import { approveOverHttp, requestCodeOverHttp, signInOverHttp, WebBrowser } from '../helpers/web.js';

/**
 * Issue 19 §5: the README's five-minute flow, its commands read from the README itself and run as
 * written, with the server running: on the embedded database (the CLI finds the server's admin
 * socket in DATA_DIR) or on PostgreSQL (DATABASE_URL), whichever this suite runs on. Then the
 * same with ADMIN_URL and ADMIN_TOKEN, as an operator of a remote server would.
 */

vi.setConfig({ testTimeout: 300_000, hookTimeout: 120_000 });

const README = readFileSync(fileURLToPath(new URL('../../README.md', import.meta.url)), 'utf8');
const PASSWORD = 'a password for the five minutes';

/** The `npx device-auth …` lines of the README's five-minute section, as argument lists. */
function readmeCommands(): string[][] {
  const section = README.slice(README.indexOf('## Trying it in five minutes'), README.indexOf('\n## ', README.indexOf('## Trying it in five minutes') + 5));
  const blocks = [...section.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]!);
  const lines = blocks.flatMap((block) => block.split('\n')).filter((line) => line.startsWith('npx device-auth '));
  return lines.map((line) => {
    const command = line.replace(/\s+#.*$/, '').slice('npx device-auth '.length);
    // Shell words: double-quoted text is one argument.
    return [...command.matchAll(/"([^"]*)"|(\S+)/g)].map((m) => m[1] ?? m[2]!);
  });
}

const folders: string[] = [];
const databases: TestDatabase[] = [];
afterAll(async () => {
  for (const dir of folders) rmSync(dir, { recursive: true, force: true });
  for (const database of databases) await database.drop();
});

/** Where the server keeps its data in this suite's mode, as environment for it and the CLI. */
async function storage(): Promise<Record<string, string>> {
  if (process.env.TEST_DATABASE_URL) {
    const database = await createTestDatabase();
    databases.push(database);
    return { DATABASE_URL: database.url!, KEY_ENCRYPTION_KEY: TEST_KEY_ENCRYPTION_KEY };
  }
  const dir = mkdtempSync(path.join(tmpdir(), 'device-auth-five-'));
  folders.push(dir);
  return { DATA_DIR: path.join(dir, 'data') };
}

/** `device-auth login` running like a TV: resolves its code and phrase as soon as it shows them. */
function startLogin(args: string[], env: Record<string, string>) {
  const child = spawn(process.execPath, [BIN, ...args], { env: { PATH: process.env.PATH, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  let shown: (value: { userCode: string; phrase: string }) => void;
  const screen = new Promise<{ userCode: string; phrase: string }>((resolve) => (shown = resolve));
  child.stdout.on('data', (chunk) => (stdout += chunk));
  child.stderr.on('data', (chunk) => {
    stderr += chunk;
    const code = /enter the code:\s+([A-Z]{4}-[A-Z]{4})/.exec(stderr)?.[1];
    const phrase = /pick this phrase:\s+(\S+)/.exec(stderr)?.[1];
    if (code && phrase) shown({ userCode: code, phrase });
  });
  const killer = setTimeout(() => child.kill('SIGKILL'), 120_000);
  const done = new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) =>
    child.on('exit', (code) => {
      clearTimeout(killer);
      resolve({ code, stdout, stderr });
    }),
  );
  return { screen, done };
}

async function withServer<T>(env: Record<string, string>, run: (server: ServerProcess, issuer: string) => Promise<T>): Promise<T> {
  const port = await freePort();
  const issuer = `http://127.0.0.1:${port}`;
  const server = await startServerProcess({ ...env, PORT: String(port), ISSUER: issuer, DEVICE_POLL_INTERVAL: '1' }, 90_000);
  try {
    return await run(server, issuer);
  } finally {
    expect(await server.stop('SIGTERM')).toBe(0);
  }
}

describe("the README's five-minute flow, with the server running", () => {
  it('the commands as written create a user and a TV app the running server uses at once, and they survive a restart', async () => {
    const commands = readmeCommands();
    expect(commands.map((c) => c.slice(0, 2).join(' '))).toEqual(['user create', 'client create', 'login --client']);
    const env = await storage();
    const clientId = await withServer(env, async (server, issuer) => {
      // Embedded, as the README runs it: the CLI is told neither PORT nor ISSUER, and `login` asks
      // the server it finds through DATA_DIR. On PostgreSQL no running server can be found from
      // DATABASE_URL, so it is told the issuer (or would need ADMIN_URL, the test below).
      const cliEnv = process.env.TEST_DATABASE_URL ? { ...env, ISSUER: issuer } : env;
      const user = await runProgram(commands[0]!, cliEnv, 120_000, `${PASSWORD}\n`);
      expect(user.code, user.stderr).toBe(0);
      expect(JSON.parse(user.stdout)).toEqual({ user_id: expect.any(String) });
      const client = await runProgram(commands[1]!, cliEnv, 120_000);
      expect(client.code, client.stderr).toBe(0);
      const created = JSON.parse(client.stdout);
      expect(created).toEqual({
        client_id: expect.stringMatching(/^tv_/),
        client_secret: null,
        introspection: false,
        grant_types: ['urn:ietf:params:oauth:grant-type:device_code', 'refresh_token'],
        redirect_uris: [],
        post_logout_redirect_uris: [],
        dpop_bound_access_tokens: false,
        confirmation_phrase: true,
      });

      // `login --client tv_…`, with the id the previous command printed.
      const login = startLogin(
        commands[2]!.map((arg) => (arg === 'tv_…' ? created.client_id : arg)),
        cliEnv,
      );
      const { userCode, phrase } = await login.screen;
      const browser = new WebBrowser(server.url);
      await signInOverHttp(browser, { email: 'you@example.com', password: PASSWORD });
      const decided = await approveOverHttp(browser, userCode, phrase);
      expect(decided.status, decided.body).toBe(200);
      const result = await login.done;
      expect(result.code, result.stderr).toBe(0);
      expect(JSON.parse(result.stdout)).toMatchObject({ token_type: 'Bearer', access_token: expect.stringMatching(/^da_at_/) });
      const devices = await browser.get('/account/devices');
      expect(devices.body).toContain('Living Room TV');
      return created.client_id as string;
    });

    // What the CLI did went into the server's database, not into a copy: it is there after a restart.
    await withServer(env, async (server) => {
      const shown = await runProgram(['user', 'show', 'you@example.com'], env, 120_000);
      expect(shown.code, shown.stderr).toBe(0);
      expect(JSON.parse(shown.stdout)).toMatchObject({ email: 'you@example.com', name: 'You' });
      expect((await requestCodeOverHttp(server.url, { clientId, clientSecret: null })).status).toBe(200);
    });
  });

  it('with ADMIN_URL and ADMIN_TOKEN the CLI changes a running server through its TCP admin API, effective at the next request', async () => {
    const env = await storage();
    const token = 'five-minute-admin-token-0123456789abcdef';
    const adminPort = await freePort();
    await withServer({ ...env, ADMIN_TOKEN: token, ADMIN_PORT: String(adminPort) }, async (server) => {
      // Nothing tells this CLI where the database is: only the admin API.
      const remote = { ADMIN_URL: `http://127.0.0.1:${adminPort}`, ADMIN_TOKEN: token, DATA_DIR: path.join(tmpdir(), 'device-auth-no-such-folder') };
      const created = await runProgram(['client', 'create', '--name', 'Remote TV', '--kind', 'tv', '--type', 'public'], remote, 120_000);
      expect(created.code, created.stderr).toBe(0);
      const client = { clientId: JSON.parse(created.stdout).client_id as string, clientSecret: null };
      expect((await requestCodeOverHttp(server.url, client)).status).toBe(200);
      // `login` without --issuer, ISSUER or PORT: the server's own issuer, asked through ADMIN_URL.
      const login = startLogin(['login', '--client', client.clientId], remote);
      await login.screen;
      const disabled = await runProgram(['client', 'disable', client.clientId], remote, 120_000);
      expect(JSON.parse(disabled.stdout)).toEqual({ client_id: client.clientId, disabled: true });
      expect((await requestCodeOverHttp(server.url, client)).status).toBe(401);
      const stopped = await login.done;
      expect(stopped.stderr).toContain(`go to:  ${server.url}/activate`);
      expect(stopped.code).toBe(1);
      expect(stopped.stderr).toContain('invalid_client');

      const wrongToken = await runProgram(['client', 'list'], { ...remote, ADMIN_TOKEN: 'not-the-token-but-long-enough-0123456789' }, 120_000);
      expect(wrongToken.code).toBe(1);
      expect(wrongToken.stderr).toContain('refused the admin token');
      const missing = await runProgram(['client', 'show', 'tv_nothing'], remote, 120_000);
      expect(missing.code).toBe(2);
      expect(missing.stderr).toContain('no client tv_nothing: see `device-auth client list`');
      // The change was logged with who and what.
      expect(server.output()).toMatch(/"action":"client\.disable","target":"tv_/);
    });
  });
});
