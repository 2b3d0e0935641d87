import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { TEST_KEY_ENCRYPTION_KEY } from '../helpers/app.js';
import { createCliTarget, runProgram, type CliTarget } from '../helpers/cli.js';

/**
 * Issue 22 §3: `device-auth keys list|rotate|revoke|rewrap`, run as the real program with no
 * server running (the in-process admin API on the database; rewrap opens the database itself).
 */

vi.setConfig({ testTimeout: 180_000, hookTimeout: 120_000 });

let target: CliTarget;
const cli = (args: string[], env: Record<string, string | undefined> = {}) => runProgram(args, { ...target.env, ...env }, 120_000);
const lines = (stdout: string) =>
  stdout
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as Record<string, any>);

beforeAll(async () => {
  target = await createCliTarget();
});
afterAll(() => target.cleanup());

describe('keys commands', () => {
  it('keys list shows the active and the next key; keys rotate schedules the next; keys revoke drops one; an unknown kid is one line, exit 2', async () => {
    const listed = await cli(['keys', 'list']);
    expect(listed.code, listed.stderr).toBe(0);
    const keys = lines(listed.stdout);
    expect(keys.map((k) => k.state).sort()).toEqual(['active', 'next']);
    expect(keys.every((k) => k.published)).toBe(true);
    const active = keys.find((k) => k.state === 'active')!;
    const next = keys.find((k) => k.state === 'next')!;

    const rotated = await cli(['keys', 'rotate']);
    expect(rotated.code, rotated.stderr).toBe(0);
    const schedule = JSON.parse(rotated.stdout);
    expect(schedule).toMatchObject({ active: active.kid, next: { kid: next.kid } });
    // Made moments ago: it signs once every JWKS cache can have seen it (300 s + 60 s).
    const wait = Date.parse(schedule.next.activates_at) - Date.parse(next.created_at);
    expect(wait).toBe(360_000);

    const revoked = await cli(['keys', 'revoke', active.kid]);
    expect(revoked.code, revoked.stderr).toBe(0);
    expect(JSON.parse(revoked.stdout).active).toBe(next.kid);
    const after = lines((await cli(['keys', 'list'])).stdout);
    expect(after.find((k) => k.kid === active.kid)).toMatchObject({ state: 'revoked', published: false });
    expect(after.find((k) => k.kid === next.kid)).toMatchObject({ state: 'active', published: true });
    expect(after.filter((k) => k.state === 'next')).toHaveLength(1);

    const unknown = await cli(['keys', 'revoke', 'no-such-key']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr.trim().split('\n')).toEqual(['device-auth: no signing key no-such-key: see `device-auth keys list`']);
    const malformed = await cli(['keys', 'revoke', 'not a kid']);
    expect(malformed.code).toBe(2);
    expect(malformed.stderr).toMatch(/not a key id/);
  });

  it('keys rewrap moves every sealed value to the new key-encryption key; then the previous one is no longer needed, and the old one alone opens nothing', async () => {
    const next = randomBytes(32).toString('base64');
    const rewrapped = await cli(['keys', 'rewrap'], { KEY_ENCRYPTION_KEY: next, KEY_ENCRYPTION_KEY_PREVIOUS: TEST_KEY_ENCRYPTION_KEY });
    expect(rewrapped.code, rewrapped.stderr).toBe(0);
    const result = JSON.parse(rewrapped.stdout);
    expect(result.signing_keys).toBeGreaterThanOrEqual(2);
    expect(result.server_secrets).toBe(4); // the user-code, anonymous CSRF, refresh-retry and DPoP nonce keys

    const listed = await cli(['keys', 'list'], { KEY_ENCRYPTION_KEY: next });
    expect(listed.code, listed.stderr).toBe(0);
    // Issue 32 §1: the operator's change is in the event log, made by the CLI, with its counts.
    const logged = await cli(['events', '--type', 'key_encryption_key.rewrapped'], { KEY_ENCRYPTION_KEY: next });
    expect(logged.code, logged.stderr).toBe(0);
    const events = logged.stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line));
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ type: 'key_encryption_key.rewrapped', actor: { kind: 'admin', via: 'cli' }, data: result });
    const old = await cli(['keys', 'list'], { KEY_ENCRYPTION_KEY: TEST_KEY_ENCRYPTION_KEY });
    expect(old.code).toBe(2);
    expect(old.stderr).toMatch(
      /^device-auth: invalid configuration: KEY_ENCRYPTION_KEY: .* is sealed under key-encryption key [0-9a-f]+, but KEY_ENCRYPTION_KEY is/,
    );
    expect(old.stderr.trim().split('\n')).toHaveLength(1);
  });
});
