import { spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';

import { verifyPassword } from '../../src/accounts/passwords.js';
import { BIN, createCliTarget, runProgram, type CliTarget } from '../helpers/cli.js';

// Each test starts real processes; on a busy 2-core machine one start can take several seconds.
vi.setConfig({ testTimeout: 120_000, hookTimeout: 120_000 });

let target: CliTarget;
const cli = (...args: string[]) => runProgram(args, target.env);
/** `device-auth ...args` with `input` piped on standard input. */
const cliWithInput = (input: string | Buffer, ...args: string[]) => runProgram(args, target.env, 60_000, input);
const usersNamed = async (email: string) => {
  const handle = await target.open();
  try {
    return await handle.db.selectFrom('users').selectAll().where('email', '=', email).execute();
  } finally {
    await handle.close();
  }
};

beforeAll(async () => {
  target = await createCliTarget();
});
afterAll(() => target.cleanup());

describe('device-auth CLI (JSON on stdout, errors on stderr with a non-zero exit)', () => {
  it('migrate applies the schema, then has nothing left to do', async () => {
    const first = await cli('migrate');
    expect(first.code, first.stderr).toBe(0);
    const again = await cli('migrate');
    expect(again.code).toBe(0);
    expect(JSON.parse(again.stdout)).toEqual({ applied: [] });
  });

  it('client create prints the id and, for a confidential client, the secret once; only its hash is stored', async () => {
    const pub = await cli('client', 'create', '--name', 'Living Room TV', '--kind', 'tv', '--type', 'public');
    expect(pub.code, pub.stderr).toBe(0);
    const publicClient = JSON.parse(pub.stdout);
    expect(publicClient).toEqual({
      client_id: expect.stringMatching(/^tv_/),
      client_secret: null,
      introspection: false,
      grant_types: ['urn:ietf:params:oauth:grant-type:device_code', 'refresh_token'],
      redirect_uris: [],
      post_logout_redirect_uris: [],
      dpop_bound_access_tokens: false,
      confirmation_phrase: true,
    });

    const conf = await cli('client', 'create', '--name', 'Chat Bot', '--kind', 'bot', '--type', 'confidential', '--scope', 'openid offline_access');
    expect(conf.code, conf.stderr).toBe(0);
    const confidential = JSON.parse(conf.stdout);
    expect(confidential.client_secret).toMatch(/^dacs_[A-Za-z0-9_-]{43}$/);
    expect(confidential.introspection).toBe(false);

    const handle = await target.open();
    try {
      const row = await handle.db.selectFrom('clients').selectAll().where('client_id', '=', confidential.client_id).executeTakeFirstOrThrow();
      expect(row.allowed_scopes).toEqual(['openid', 'offline_access']);
      expect(Buffer.from(row.secret_hash!).toString('hex')).not.toContain(Buffer.from(confidential.client_secret).toString('hex'));
      expect(JSON.stringify(row)).not.toContain(confidential.client_secret);
    } finally {
      await handle.close();
    }
  });

  it('client create makes a confidential web app a resource server that may introspect only with --introspection (issue 28 §4)', async () => {
    const created = async (...args: string[]) => {
      const res = await cli('client', 'create', '--name', 'Photo API', ...args);
      expect(res.code, res.stderr).toBe(0);
      return JSON.parse(res.stdout) as { client_id: string; introspection: boolean };
    };
    const resourceServer = await created('--kind', 'web', '--type', 'confidential', '--introspection');
    const notOne = await created('--kind', 'web', '--type', 'confidential');
    const publicWeb = await created('--kind', 'web', '--type', 'public');
    const bot = await created('--kind', 'bot', '--type', 'confidential');
    expect([resourceServer, notOne, publicWeb, bot].map((c) => c.introspection)).toEqual([true, false, false, false]);
    const handle = await target.open();
    try {
      const rows = await handle.db
        .selectFrom('clients')
        .select(['client_id', 'introspection_allowed'])
        .where('client_id', 'in', [resourceServer.client_id, notOne.client_id, publicWeb.client_id, bot.client_id])
        .execute();
      expect(Object.fromEntries(rows.map((r) => [r.client_id, r.introspection_allowed]))).toEqual({
        [resourceServer.client_id]: true,
        [notOne.client_id]: false,
        [publicWeb.client_id]: false,
        [bot.client_id]: false,
      });
    } finally {
      await handle.close();
    }
  });

  it('client disable and enable flip the app, and name an unknown client as an error', async () => {
    const { client_id } = JSON.parse((await cli('client', 'create', '--name', 'Box', '--kind', 'tv', '--type', 'public')).stdout);
    const disabled = await cli('client', 'disable', client_id);
    expect(disabled.code).toBe(0);
    expect(JSON.parse(disabled.stdout)).toEqual({ client_id, disabled: true });
    const enabled = await cli('client', 'enable', client_id);
    expect(JSON.parse(enabled.stdout)).toEqual({ client_id, disabled: false });
    const unknown = await cli('client', 'disable', 'tv_nobody');
    expect(unknown.code).not.toBe(0);
    expect(unknown.stdout).toBe('');
    expect(unknown.stderr).toContain('no client tv_nobody');
  });

  it('user create reads the password from standard input (first line), stores an argon2id hash; a second account with the same email is refused', async () => {
    const password = 'a long enough password';
    const created = await cliWithInput(`${password}\nthe rest is not read\n`, 'user', 'create', '--email', 'Ada@Example.test', '--name', 'Ada');
    expect(created.code, created.stderr).toBe(0);
    expect(JSON.parse(created.stdout)).toEqual({ user_id: expect.stringMatching(/^[0-9a-f-]{36}$/) });
    // What ps and /proc/PID/cmdline show: the password is not there.
    expect(created.argv.join(' ')).not.toContain(password);
    const duplicate = await cliWithInput('another password\n', 'user', 'create', '--email', 'ada@example.test');
    expect(duplicate.code).not.toBe(0);
    expect(duplicate.stderr).toContain('a user with this email exists: use `device-auth user show ada@example.test`');
    const [row] = await usersNamed('ada@example.test');
    expect(row!.password_hash).toMatch(/^\$argon2id\$/);
    expect(await verifyPassword(row!.password_hash, password)).toBe(true);
  });

  it('user create reads the password from the environment variable named by --password-env, and it is not in argv', async () => {
    const password = 'a password from the environment';
    const res = await runProgram(['user', 'create', '--email', 'env@example.test', '--password-env', 'NEW_USER_PASSWORD'], {
      ...target.env,
      NEW_USER_PASSWORD: password,
    });
    expect(res.code, res.stderr).toBe(0);
    expect(res.argv.join(' ')).not.toContain(password);
    const [row] = await usersNamed('env@example.test');
    expect(await verifyPassword(row!.password_hash, password)).toBe(true);
  });

  it('user create on a terminal prompts for the password and does not echo what is typed', async () => {
    const password = 'typed at the prompt';
    // util-linux `script` gives the program a pseudo-terminal; what it shows comes back on stdout.
    const command = [process.execPath, BIN, 'user', 'create', '--email', 'tty@example.test'].map((a) => `'${a}'`).join(' ');
    const child = spawn('script', ['-qec', command, '/dev/null'], { env: { PATH: process.env.PATH, ...target.env }, stdio: 'pipe' });
    const killer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    let screen = '';
    const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
    await new Promise<void>((resolve) =>
      child.stdout.on('data', (chunk) => {
        screen += chunk;
        if (screen.includes('Password: ')) resolve();
      }),
    );
    child.stdin.write(`${password}\r`);
    const code = await exited;
    clearTimeout(killer);
    expect(code, screen).toBe(0);
    expect(screen).toContain('user_id');
    expect(screen).not.toContain(password);
    const [row] = await usersNamed('tty@example.test');
    expect(await verifyPassword(row!.password_hash, password)).toBe(true);
  });

  it.each([
    ['--password VALUE', ['--password', 'a long enough password'], '--password-env'],
    ['--password=VALUE', ['--password=a long enough password'], '--password-env'],
  ])('user create %s is refused with how to pass it now, exit 2, and no user is written', async (_name, option, hint) => {
    const res = await cliWithInput('a long enough password\n', 'user', 'create', '--email', 'argv@example.test', ...option);
    expect(res.code).toBe(2);
    expect(res.stdout).toBe('');
    expect(res.stderr).toContain('shows in ps and in shell history');
    expect(res.stderr).toContain(hint);
    // The refusal does not repeat the secret.
    expect(res.stderr).not.toContain('a long enough password');
    expect(await usersNamed('argv@example.test')).toEqual([]);
  });

  it('login --secret VALUE is refused with how to pass it now, exit 2, before contacting anything', async () => {
    const res = await cli('login', '--client', 'bot_x', '--secret', 'dacs_not_here', '--issuer', 'http://127.0.0.1:9');
    expect(res.code).toBe(2);
    expect(res.stderr).toContain('--secret-env');
    expect(res.stderr).not.toContain('dacs_not_here');
  });

  it.each([
    ['nothing on standard input', '', [], 'no password given'],
    ['an unset variable', '', ['--password-env', 'NOT_SET_ANYWHERE'], 'NOT_SET_ANYWHERE'],
    ['a NUL in the password', 'long enough\0password\n', [], 'NUL'],
    ['invalid UTF-8', Buffer.from([...Buffer.from('long '), 0xff, 0xfe, ...Buffer.from(' password\n')]), [], 'UTF-8'],
  ])('user create with %s is refused, exit 2, and no user is written', async (_name, input, option, mention) => {
    const res = await runProgram(['user', 'create', '--email', 'bad-input@example.test', ...option], target.env, 60_000, input);
    expect(res.code).toBe(2);
    expect(res.stderr).toContain(mention);
    expect(await usersNamed('bad-input@example.test')).toEqual([]);
  });

  it('user ban and unban', async () => {
    await cliWithInput('a long enough password\n', 'user', 'create', '--email', 'eve@example.test');
    const ban = await cli('user', 'ban', 'eve@example.test');
    expect(ban.code, ban.stderr).toBe(0);
    expect(JSON.parse(ban.stdout)).toMatchObject({ banned: true, revoked_grants: 0 });
    const unban = await cli('user', 'unban', 'EVE@example.test');
    expect(JSON.parse(unban.stdout)).toMatchObject({ banned: false });
    const nobody = await cli('user', 'ban', 'nobody@example.test');
    expect(nobody.code).not.toBe(0);
    expect(nobody.stderr).toContain('no user');
  });

  it.each([
    [['client', 'create', '--name', 'X', '--kind', 'fridge', '--type', 'public'], 'kind'],
    [['client', 'create', '--name', 'X', '--kind', 'tv'], '--type is required'],
    [['client', 'create', '--name', 'X', '--kind', 'tv', '--type', 'public', '--scope', 'admin'], 'scopes'],
    [['user', 'create', '--email', 'not-an-email', '--password-env', 'PATH'], 'email'],
    [['user', 'create', '--email', 'short@example.test', '--password-env', 'SHORT_PASSWORD'], 'at least 8'],
    [['client', 'create', '--bogus'], 'bogus'],
    [['frobnicate'], 'unknown command'],
  ])('bad input %j is refused on stderr naming %s, exit 2', async (args, mention) => {
    const res = await runProgram(args, { ...target.env, SHORT_PASSWORD: 'short' });
    expect(res.code).toBe(2);
    expect(res.stdout).toBe('');
    expect(res.stderr).toContain(mention);
  });

  it('a bad configuration value is one clear line naming the variable', async () => {
    const res = await runProgram(['migrate'], { DATABASE_URL: 'not a url' });
    expect(res.code).toBe(2);
    expect(res.stderr.trim().split('\n')).toHaveLength(1);
    expect(res.stderr).toContain('DATABASE_URL');
  });
});
