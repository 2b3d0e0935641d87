import { PGlite } from '@electric-sql/pglite';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { seedClient, seedUser, startTestApp, type TestApp } from '../helpers/app.js';
import { decide, poll, startDeviceFlow } from '../helpers/device.js';
import { postAs, refresh, type TestClient, type TokenSet } from '../helpers/tokens.js';

/**
 * Issue 31 §1: a grant's origin is written by the statement that creates the grant, so the hot
 * paths make no round trip more for it. Every round trip to the database (BEGIN and COMMIT
 * included) is counted at the driver, for the poll that redeems, a refresh and an introspection.
 * The figures are those of main before the origin was added (77d39c3, measured there with this file
 * on both databases: 10, 1 and 1).
 */

const EXPECTED = { redeemingPoll: 10, refresh: 1, introspection: 1 };

let t: TestApp;
let tv: TestClient;
let rs: TestClient;
let user: { userId: string };
const sent: string[] = [];

function countAt<T extends object>(prototype: T, method: keyof T): () => void {
  const original = prototype[method] as unknown as (...args: unknown[]) => unknown;
  (prototype as Record<keyof T, unknown>)[method] = function (this: unknown, ...args: unknown[]) {
    const text = typeof args[0] === 'string' ? args[0] : (args[0] as { text?: string } | undefined)?.text;
    sent.push((text ?? '?').slice(0, 60));
    return original.apply(this, args);
  };
  return () => {
    (prototype as Record<keyof T, unknown>)[method] = original;
  };
}

const restore: (() => void)[] = [];
beforeAll(async () => {
  t = await startTestApp();
  tv = await seedClient(t, { kind: 'tv' });
  rs = await seedClient(t, { kind: 'web', type: 'confidential', name: 'Photo API' });
  user = await seedUser(t);
  restore.push(countAt(pg.Client.prototype, 'query'), countAt(PGlite.prototype, 'query'), countAt(PGlite.prototype, 'exec'));
});
afterAll(async () => {
  for (const undo of restore) undo();
  await t.close();
});

async function roundTrips(run: () => Promise<unknown>): Promise<number> {
  sent.length = 0;
  await run();
  return sent.length;
}

describe('§1 no round trip more on the hot paths', () => {
  it('the redeeming poll, a refresh and an introspection make as many round trips as before the origin', async () => {
    // The first time through fills the per-instance caches (the apps); the second is counted.
    let counted = { redeemingPoll: 0, refresh: 0, introspection: 0 };
    for (let time = 0; time < 2; time++) {
      const flow = await startDeviceFlow(t, tv.clientId);
      expect(await decide(t, flow.user_code, user.userId, 'approve')).toBe('approved');
      t.clock.advance(flow.interval);
      let tokens: TokenSet | undefined;
      const redeemingPoll = await roundTrips(async () => {
        const res = await poll(t, tv.clientId, flow.device_code);
        expect(res.statusCode, res.body).toBe(200);
        tokens = res.json();
      });
      const refreshTrips = await roundTrips(async () => expect((await refresh(t, tv, tokens!.refresh_token!)).statusCode).toBe(200));
      const introspectionTrips = await roundTrips(async () =>
        expect((await postAs(t, rs, '/oauth/introspect', { token: tokens!.access_token })).statusCode).toBe(200),
      );
      counted = { redeemingPoll, refresh: refreshTrips, introspection: introspectionTrips };
    }
    expect(counted).toEqual(EXPECTED);
  });
});
