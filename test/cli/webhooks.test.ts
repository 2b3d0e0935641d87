import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createCliTarget, runProgram, type CliTarget } from '../helpers/cli.js';

/**
 * Issue 32 §2: `device-auth webhooks …`, run as the real program with no server running (the
 * in-process admin API on the database).
 */

vi.setConfig({ testTimeout: 180_000, hookTimeout: 120_000 });

let target: CliTarget;
const cli = (args: string[], env: Record<string, string | undefined> = {}) => runProgram(args, { ...target.env, ...env }, 120_000);
const lines = (stdout: string) =>
  stdout
    .trim()
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as Record<string, any>);

beforeAll(async () => {
  target = await createCliTarget();
});
afterAll(() => target.cleanup());

describe('webhooks commands', () => {
  it('add prints {"id", "secret"} once; list and show never show the secret; pause, resume, deliveries, replay and remove work by id', async () => {
    const added = await cli(['webhooks', 'add', 'https://hooks.example.com/device-auth', '--events', 'grant.revoked, user.banned']);
    expect(added.code, added.stderr).toBe(0);
    const { id, secret, ...rest } = JSON.parse(added.stdout);
    expect(rest).toEqual({});
    expect(id).toMatch(/^wh_/);
    expect(secret).toMatch(/^whsec_/);
    const all = await cli(['webhooks', 'add', 'https://all.example.com/hook']);
    expect(all.code, all.stderr).toBe(0);

    const listed = await cli(['webhooks', 'list']);
    expect(listed.code, listed.stderr).toBe(0);
    const items = lines(listed.stdout);
    expect(items.find((w) => w.id === id)).toMatchObject({
      url: 'https://hooks.example.com/device-auth',
      events: ['grant.revoked', 'user.banned'],
      status: 'active',
    });
    expect(items.find((w) => w.id === JSON.parse(all.stdout).id)).toMatchObject({ events: null });
    expect(listed.stdout).not.toContain(secret.slice(6));

    expect(JSON.parse((await cli(['webhooks', 'pause', id])).stdout)).toMatchObject({ id, status: 'paused', paused_reason: 'operator' });
    const shown = await cli(['webhooks', 'show', id]);
    expect(JSON.parse(shown.stdout)).toMatchObject({ id, status: 'paused' });
    expect(shown.stdout).not.toContain(secret.slice(6));
    expect(JSON.parse((await cli(['webhooks', 'resume', id])).stdout)).toMatchObject({ id, status: 'active' });
    const deliveries = await cli(['webhooks', 'deliveries', id]);
    expect(deliveries.code, deliveries.stderr).toBe(0);
    expect(deliveries.stdout.trim()).toBe('');
    const replayed = await cli(['webhooks', 'replay', id, '--since', '2026-01-01T00:00:00Z']);
    expect(replayed.code, replayed.stderr).toBe(0);
    expect(JSON.parse(replayed.stdout)).toMatchObject({ complete: true });
    expect(JSON.parse((await cli(['webhooks', 'remove', id])).stdout)).toEqual({ deleted: true });

    const gone = await cli(['webhooks', 'show', id]);
    expect(gone.code).toBe(2);
    expect(gone.stderr.trim()).toBe(`device-auth: no webhook ${id}: see \`device-auth webhooks list\``);
  });

  it('an unknown type, a private address or a missing --since is one line on stderr, exit 2, and nothing is added', async () => {
    const before = lines((await cli(['webhooks', 'list'])).stdout).length;
    const unknown = await cli(['webhooks', 'add', 'https://hooks.example.com/x', '--events', 'grant.revoked,grant.exploded']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/not an event type/);
    const privateAddress = await cli(['webhooks', 'add', 'https://10.0.0.1/x']);
    expect(privateAddress.code).toBe(2);
    expect(privateAddress.stderr.trim()).toBe('device-auth: body.url: must not be a private, loopback, link-local or reserved address');
    const loopback = await cli(['webhooks', 'add', 'http://127.0.0.1:8080/x']);
    expect(loopback.code).toBe(2);
    expect(loopback.stderr).toMatch(/must be https/);
    expect((await cli(['webhooks', 'replay', 'wh_0000000000000000'])).stderr).toMatch(/--since is required/);
    expect(lines((await cli(['webhooks', 'list'])).stdout)).toHaveLength(before);
  });
});
