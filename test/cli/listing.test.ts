import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createClient } from '../../src/apps/registration.js';
import { createUser } from '../../src/accounts/users.js';
import { createCliTarget, runProgram, type CliTarget } from '../helpers/cli.js';

/** Issue 19 §3: client list, client show, user list (and user show), paged, never a secret. */

vi.setConfig({ testTimeout: 120_000, hookTimeout: 120_000 });

let target: CliTarget;
const cli = (...args: string[]) => runProgram(args, target.env);
const lines = (stdout: string) =>
  stdout
    .trim()
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as Record<string, unknown>);
let clientIds: string[];

beforeAll(async () => {
  target = await createCliTarget();
  const handle = await target.open();
  try {
    const { migrateToLatest } = await import('../../src/db/migrate.js');
    await migrateToLatest(handle.db);
    clientIds = [];
    for (let i = 0; i < 5; i++) {
      const created = await createClient(handle.db, {
        name: `App ${i}`,
        kind: i % 2 ? 'bot' : 'tv',
        type: i % 2 ? 'confidential' : 'public',
        scopes: ['openid'],
      });
      clientIds.push(created.client_id);
    }
    clientIds.sort();
    for (const [email, name] of [
      ['ada@example.test', 'Ada Lovelace'],
      ['grace@example.test', 'Grace Hopper'],
      ['alan@example.test', 'Alan 100%_sure'],
    ]) {
      await createUser(handle.db, { email: email!, password: 'a long enough password', name });
    }
  } finally {
    await handle.close();
  }
});
afterAll(() => target.cleanup());

describe('listing and showing clients and users', () => {
  it('client list pages in client_id order with --limit and --after, and shows no secret', async () => {
    const first = await cli('client', 'list', '--limit', '3');
    expect(first.code, first.stderr).toBe(0);
    const firstPage = lines(first.stdout);
    expect(firstPage.map((c) => c.client_id)).toEqual(clientIds.slice(0, 3));
    const next = lines((await cli('client', 'list', '--limit', '3', '--after', String(firstPage.at(-1)!.client_id))).stdout);
    expect(next.map((c) => c.client_id)).toEqual(clientIds.slice(3));
    expect(Object.keys(firstPage[0]!).sort()).toEqual([
      'client_id',
      'confirmation_phrase',
      'created_at',
      'disabled',
      'dpop_bound_access_tokens',
      'grant_types',
      'introspection',
      'kind',
      'name',
      'post_logout_redirect_uris',
      'redirect_uris',
      'scopes',
      'ssf_all_users',
      'type',
    ]);
    expect(first.stdout).not.toMatch(/secret|hash/);
  });

  it('client update --ssf-all-users and --no-ssf-all-users switch whom the app hears of in Shared Signals, as client show says', async () => {
    const clientId = clientIds[0]!;
    expect(JSON.parse((await cli('client', 'show', clientId)).stdout).ssf_all_users).toBe(false);
    const on = await cli('client', 'update', clientId, '--ssf-all-users');
    expect(on.code, on.stderr).toBe(0);
    expect(JSON.parse((await cli('client', 'show', clientId)).stdout).ssf_all_users).toBe(true);
    const both = await cli('client', 'update', clientId, '--ssf-all-users', '--no-ssf-all-users');
    expect(both.code).not.toBe(0);
    expect(both.stderr).toMatch(/not both/);
    const off = await cli('client', 'update', clientId, '--no-ssf-all-users');
    expect(off.code, off.stderr).toBe(0);
    expect(JSON.parse((await cli('client', 'show', clientId)).stdout).ssf_all_users).toBe(false);
  });

  it('client show prints one client; an unknown one says what to do', async () => {
    const shown = await cli('client', 'show', clientIds[0]!);
    expect(shown.code, shown.stderr).toBe(0);
    expect(JSON.parse(shown.stdout)).toMatchObject({ client_id: clientIds[0], disabled: false });
    const unknown = await cli('client', 'show', 'tv_nothing');
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain('no client tv_nothing: see `device-auth client list`');
  });

  it('user list pages in email order; --search matches email or name, wildcards taken literally', async () => {
    const all = lines((await cli('user', 'list')).stdout);
    expect(all.map((u) => u.email)).toEqual(['ada@example.test', 'alan@example.test', 'grace@example.test']);
    expect(Object.keys(all[0]!).sort()).toEqual(['banned', 'created_at', 'email', 'name', 'user_id']);
    expect(lines((await cli('user', 'list', '--search', 'HOPPER')).stdout).map((u) => u.email)).toEqual(['grace@example.test']);
    expect(lines((await cli('user', 'list', '--search', '%_')).stdout).map((u) => u.email)).toEqual(['alan@example.test']);
    expect(lines((await cli('user', 'list', '--limit', '1', '--after', 'ada@example.test')).stdout).map((u) => u.email)).toEqual(['alan@example.test']);
  });

  it('user show prints one user without the password hash; an unknown one says what to do', async () => {
    const shown = await cli('user', 'show', 'ADA@example.test');
    expect(shown.code, shown.stderr).toBe(0);
    expect(JSON.parse(shown.stdout)).toMatchObject({ email: 'ada@example.test', name: 'Ada Lovelace', banned: false });
    expect(shown.stdout).not.toContain('argon2');
    const unknown = await cli('user', 'show', 'nobody@example.test');
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain('no user nobody@example.test: see `device-auth user list --search`');
  });

  it.each([['0'], ['501'], ['ten']])('--limit %s is refused, exit 2', async (limit) => {
    const res = await cli('user', 'list', '--limit', limit);
    expect(res.code).toBe(2);
    expect(res.stderr).toContain('--limit must be a whole number from 1 to 500');
  });
});
