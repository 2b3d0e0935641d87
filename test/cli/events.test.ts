import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';

import { banUser } from '../../src/accounts/bans.js';
import { revokeGrants } from '../../src/oauth/grant-revocation.js';
import { migrateToLatest } from '../../src/db/migrate.js';
import { seedClient, seedUser, startTestApp } from '../helpers/app.js';
import { createCliTarget, runProgram, type CliTarget } from '../helpers/cli.js';
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
    await t.deps.db.transaction().execute((trx) => revokeGrants(trx, { grantId: signedOutGrant }, 'signed_out_by_user', { now: t.clock.now(), ip: '203.0.113.7' }));
    await signIn(t, tv, user.userId);
    await t.deps.db.transaction().execute((trx) => revokeGrants(trx, { userId: user.userId, clientId: tv.clientId }, 'access_removed', { now: t.clock.now(), ip: '203.0.113.8' }));
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
    const events = res.stdout.trim().split('\n').map((line) => JSON.parse(line));
    const summary = events.map((e) => `${e.event}${e.reason ? `:${e.reason}` : ''}`);
    expect(summary).toEqual([
      'issued:device_code',
      'rotated',
      'revoked:reuse_detected',
      'issued:device_code',
      'revoked:revoked_by_app',
      'issued:device_code',
      'revoked:signed_out_by_user',
      'issued:device_code',
      'revoked:access_removed',
      'issued:device_code',
      'revoked:user_banned',
    ]);
    for (const e of events) {
      expect(e).toMatchObject({ app: 'Living Room TV', grant_id: expect.any(String), at: expect.stringMatching(/^\d{4}-\d\d-\d\dT/) });
    }
    // Requests over HTTP record the caller's IP.
    expect(events[0].client_ip).toBe('127.0.0.1');
    expect(events[6].client_ip).toBe('203.0.113.7');
  });

  it('an unknown user is an error on stderr', async () => {
    const res = await runProgram(['events', '--user', 'nobody@example.test'], target.env);
    expect(res.code).toBe(2);
    expect(res.stderr).toContain('no user');
  });
});
