import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';

import { createCliTarget, runProgram, type CliTarget } from '../helpers/cli.js';

// Each test starts real processes; on a busy 2-core machine one start can take several seconds.
vi.setConfig({ testTimeout: 120_000, hookTimeout: 120_000 });

let target: CliTarget;
const cli = (...args: string[]) => runProgram(args, target.env);

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
    expect(publicClient).toEqual({ client_id: expect.stringMatching(/^tv_/), client_secret: null });

    const conf = await cli('client', 'create', '--name', 'Chat Bot', '--kind', 'bot', '--type', 'confidential', '--scope', 'openid offline_access');
    expect(conf.code, conf.stderr).toBe(0);
    const confidential = JSON.parse(conf.stdout);
    expect(confidential.client_secret).toMatch(/^dacs_[A-Za-z0-9_-]{43}$/);

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

  it('user create stores an argon2id hash; a second account with the same email is refused', async () => {
    const created = await cli('user', 'create', '--email', 'Ada@Example.test', '--password', 'a long enough password', '--name', 'Ada');
    expect(created.code, created.stderr).toBe(0);
    expect(JSON.parse(created.stdout)).toEqual({ user_id: expect.stringMatching(/^[0-9a-f-]{36}$/) });
    const duplicate = await cli('user', 'create', '--email', 'ada@example.test', '--password', 'another password');
    expect(duplicate.code).not.toBe(0);
    expect(duplicate.stderr).toContain('already exists');
    const handle = await target.open();
    try {
      const row = await handle.db.selectFrom('users').selectAll().where('email', '=', 'ada@example.test').executeTakeFirstOrThrow();
      expect(row.password_hash).toMatch(/^\$argon2id\$/);
    } finally {
      await handle.close();
    }
  });

  it('user ban and unban', async () => {
    await cli('user', 'create', '--email', 'eve@example.test', '--password', 'a long enough password');
    const ban = await cli('user', 'ban', 'eve@example.test');
    expect(ban.code, ban.stderr).toBe(0);
    expect(JSON.parse(ban.stdout)).toMatchObject({ banned: true, revoked_chains: 0 });
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
    [['user', 'create', '--email', 'not-an-email', '--password', 'long enough password'], 'email'],
    [['user', 'create', '--email', 'short@example.test', '--password', 'short'], 'at least 8'],
    [['client', 'create', '--bogus'], 'bogus'],
    [['frobnicate'], 'unknown command'],
  ])('bad input %j is refused on stderr naming %s, exit 2', async (args, mention) => {
    const res = await cli(...args);
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
