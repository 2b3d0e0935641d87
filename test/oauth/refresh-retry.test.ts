import { createLocalJWKSet, jwtVerify } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashOpaque } from '../../src/oauth/opaque-tokens.js';
import { createTestDatabase, type TestDatabase } from '../helpers/database.js';
import { seedClient, seedUser, startTestApp, type TestApp } from '../helpers/app.js';
import { holdLocks } from '../helpers/lock-holder.js';
import {
  ALL_SCOPES as ALL,
  eventsOf,
  expectAllRefused,
  grantOf,
  refresh,
  refreshed,
  signIn,
  startWithClients,
  userinfo,
  type TestClient,
  type TokenSet,
} from '../helpers/tokens.js';

/**
 * Issue 22 §1: a refresh whose answer was lost, retried with the token the device still holds,
 * gets that answer again, and only that: any other presentation of a replaced token is reuse.
 */

let t: TestApp;
let tv: TestClient;
let rs: TestClient;
let user: { userId: string; email: string };

beforeAll(async () => {
  ({ t, tv, rs, user } = await startWithClients());
});
afterAll(() => t.close());

const hex = (bytes: Uint8Array | null | undefined) => (bytes ? Buffer.from(bytes).toString('hex') : null);

/** The refresh tokens of `tokens` that the server would still rotate: at most one, ever. */
async function liveAmong(app: TestApp, grantId: string, tokens: string[]): Promise<string[]> {
  const grant = await app.deps.db.selectFrom('grants').select(['current_refresh_hash', 'revoked_at']).where('grant_id', '=', grantId).executeTakeFirstOrThrow();
  if (grant.revoked_at !== null) return [];
  return tokens.filter((token) => hex(hashOpaque(token)) === hex(grant.current_refresh_hash));
}

async function expectReuseRevoked(app: TestApp, presented: string, held: TokenSet[]): Promise<void> {
  const res = await refresh(app, tv, presented);
  expect(res.statusCode).toBe(400);
  expect(res.json()).toMatchObject({ error: 'invalid_grant', error_description: expect.stringContaining('revoked') });
  const grant = await grantOf(app, presented);
  expect(grant).toMatchObject({ revoked_reason: 'reuse_detected' });
  await expectAllRefused(app, rs, tv, { access: held.map((h) => h.access_token), refresh: held.map((h) => h.refresh_token!) });
}

describe('a retried refresh gets the same answer (REFRESH_RETRY_WINDOW, default 30 s)', () => {
  it('the previous token within the window: the same refresh and access tokens, a fresh ID token, the grant live', async () => {
    const first = await signIn(t, tv, user.userId, ALL);
    t.clock.advance(120);
    const lost = await refreshed(t, tv, first.refresh_token!);
    t.clock.advance(29);
    const res = await refresh(t, tv, first.refresh_token!);
    expect(res.statusCode).toBe(200);
    expect(res.headers['cache-control']).toBe('no-store');
    const retried: TokenSet = res.json();
    expect(retried.refresh_token).toBe(lost.refresh_token);
    expect(retried.access_token).toBe(lost.access_token);
    expect(retried).toMatchObject({ token_type: 'Bearer', scope: lost.scope, expires_in: 3600 - 29 });

    const jwks = createLocalJWKSet((await t.app.inject({ method: 'GET', url: '/.well-known/jwks.json' })).json());
    const options = { issuer: 'http://localhost:3000', audience: tv.clientId, currentDate: t.clock.now() };
    const before = (await jwtVerify(lost.id_token!, jwks, options)).payload;
    const after = (await jwtVerify(retried.id_token!, jwks, options)).payload;
    expect(after).toMatchObject({ sub: before.sub, auth_time: before.auth_time });

    expect((await userinfo(t, retried.access_token)).statusCode).toBe(200);
    const grant = await grantOf(t, first.refresh_token!);
    expect(grant.revoked_at).toBeNull();
    expect(grant.last_used_at).toEqual(t.clock.now());
    expect((await eventsOf(t, grant.grant_id)).map((e) => e.type)).toEqual(['grant.issued', 'grant.rotated', 'grant.retried']);
    // The successor carries on as if the first answer had arrived.
    const next = await refreshed(t, tv, retried.refresh_token!);
    expect(await liveAmong(t, grant.grant_id, [first.refresh_token!, lost.refresh_token!, next.refresh_token!])).toEqual([next.refresh_token]);
  });

  it('retried several times, one after another, it gets the same answer each time', async () => {
    const first = await signIn(t, tv, user.userId, ALL);
    const lost = await refreshed(t, tv, first.refresh_token!);
    for (let i = 0; i < 3; i++) {
      t.clock.advance(5);
      const again = await refreshed(t, tv, first.refresh_token!);
      expect([again.refresh_token, again.access_token]).toEqual([lost.refresh_token, lost.access_token]);
    }
  });

  it('a narrowed scope in the lost refresh is the scope of the retried answer', async () => {
    const first = await signIn(t, tv, user.userId, ALL);
    const lost = await refreshed(t, tv, first.refresh_token!, 'openid profile');
    const retried = await refreshed(t, tv, first.refresh_token!);
    expect(retried).toMatchObject({ scope: 'openid profile', access_token: lost.access_token, refresh_token: lost.refresh_token });
  });

  it('successors are new each rotation: no token of a chain repeats', async () => {
    const first = await signIn(t, tv, user.userId, ALL);
    const seen = new Set([first.refresh_token, first.access_token]);
    let current = first;
    for (let i = 0; i < 4; i++) {
      current = await refreshed(t, tv, current.refresh_token!);
      expect(seen.has(current.refresh_token)).toBe(false);
      expect(seen.has(current.access_token)).toBe(false);
      seen.add(current.refresh_token).add(current.access_token);
    }
  });
});

describe('any other presentation of a replaced token is reuse: the grant is revoked', () => {
  it('after the window', async () => {
    const first = await signIn(t, tv, user.userId, ALL);
    const lost = await refreshed(t, tv, first.refresh_token!);
    t.clock.advance(31);
    await expectReuseRevoked(t, first.refresh_token!, [first, lost]);
  });

  it('after the successor was used, even within the window', async () => {
    const first = await signIn(t, tv, user.userId, ALL);
    const second = await refreshed(t, tv, first.refresh_token!);
    const third = await refreshed(t, tv, second.refresh_token!);
    await expectReuseRevoked(t, first.refresh_token!, [first, second, third]);
  });

  it('a token two generations old, within the window of both rotations', async () => {
    const first = await signIn(t, tv, user.userId, ALL);
    const second = await refreshed(t, tv, first.refresh_token!);
    const third = await refreshed(t, tv, second.refresh_token!);
    // The second is the immediately previous one and could be retried; the first cannot.
    await expectReuseRevoked(t, first.refresh_token!, [second, third]);
  });

  it("another app's replaced token: invalid_grant, and its owner's grant is neither retried nor revoked", async () => {
    const other = await seedClient(t, { kind: 'tv' });
    const first = await signIn(t, other, user.userId, ALL);
    const second = await refreshed(t, other, first.refresh_token!);
    const res = await refresh(t, tv, first.refresh_token!);
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toBe('invalid_grant');
    expect((await grantOf(t, first.refresh_token!)).revoked_at).toBeNull();
    await refreshed(t, other, second.refresh_token!);
  });

  it('REFRESH_RETRY_WINDOW=0 turns retries off: the first presentation again is reuse', async () => {
    const strict = await startTestApp({ env: { REFRESH_RETRY_WINDOW: '0' } });
    try {
      const app = await seedClient(strict, { kind: 'tv' });
      const owner = await seedUser(strict);
      const first = await signIn(strict, app, owner.userId, ALL);
      const lost = await refreshed(strict, app, first.refresh_token!);
      const res = await refresh(strict, app, first.refresh_token!);
      expect(res.json().error).toBe('invalid_grant');
      expect(await grantOf(strict, lost.refresh_token!)).toMatchObject({ revoked_reason: 'reuse_detected' });
    } finally {
      await strict.close();
    }
  });

  it.each(['-1', '301', '30.5', 'soon'])('REFRESH_RETRY_WINDOW=%s is a configuration error', async (value) => {
    await expect(startTestApp({ env: { REFRESH_RETRY_WINDOW: value } })).rejects.toThrow(/REFRESH_RETRY_WINDOW/);
  });
});

describe('races: each ends with exactly one live refresh token or a revoked grant', () => {
  /** On PostgreSQL, holds the grant's row until `waiters` statements queue on it, so they contend. */
  async function holdGrantRow(app: TestApp, grantId: string): Promise<(waiters: number) => Promise<void>> {
    if (!app.database.url) return async () => {};
    const holder = await holdLocks(app.database.url);
    await holder.query('SELECT 1 FROM grants WHERE grant_id = $1 FOR UPDATE', [grantId]);
    return (waiters) => holder.commitWhenWaiting(waiters);
  }

  it('ten retries at once: all get the lost answer, none revokes', async () => {
    const first = await signIn(t, tv, user.userId, ALL);
    const lost = await refreshed(t, tv, first.refresh_token!);
    const grant = await grantOf(t, first.refresh_token!);
    const release = await holdGrantRow(t, grant.grant_id);
    const racing = Promise.all(Array.from({ length: 10 }, () => refresh(t, tv, first.refresh_token!)));
    await release(10);
    const results = await racing;
    expect(results.map((r) => r.statusCode)).toEqual(Array(10).fill(200));
    for (const answer of results.map((r) => r.json() as TokenSet)) {
      expect([answer.refresh_token, answer.access_token]).toEqual([lost.refresh_token, lost.access_token]);
    }
    expect(await liveAmong(t, grant.grant_id, [first.refresh_token!, lost.refresh_token!])).toEqual([lost.refresh_token]);
    expect((await eventsOf(t, grant.grant_id)).filter((e) => e.type === 'grant.retried')).toHaveLength(10);
  });

  it('a retry against the successor’s first use, many rounds: the retry wins and the successor rotates, or the grant is revoked', async () => {
    const seen = { retryFirst: 0, revoked: 0 };
    for (let round = 0; round < 12; round++) {
      const first = await signIn(t, tv, user.userId, ALL);
      const second = await refreshed(t, tv, first.refresh_token!);
      const grant = await grantOf(t, first.refresh_token!);
      const release = await holdGrantRow(t, grant.grant_id);
      // Alternate which is sent first, so that on the embedded database both orders run.
      const [retry, use] =
        round % 2 === 0
          ? await Promise.all([refresh(t, tv, first.refresh_token!), refresh(t, tv, second.refresh_token!), release(2)])
          : await Promise.all([refresh(t, tv, second.refresh_token!), refresh(t, tv, first.refresh_token!), release(2)]).then(([u, r]) => [r, u]);
      const held = [first.refresh_token!, second.refresh_token!];
      if (use!.statusCode === 200) held.push((use!.json() as TokenSet).refresh_token!);
      const live = await liveAmong(t, grant.grant_id, held);
      if (retry!.statusCode === 200) {
        // The retry came first and got the lost answer; then the successor rotated as usual.
        expect((retry!.json() as TokenSet).refresh_token).toBe(second.refresh_token);
        expect(use!.statusCode).toBe(200);
        expect(live).toEqual([(use!.json() as TokenSet).refresh_token]);
        seen.retryFirst++;
      } else {
        // The successor rotated first, so the retry was reuse: nothing of the grant lives on.
        expect(retry!.json().error).toBe('invalid_grant');
        expect(live).toEqual([]);
        expect((await grantOf(t, first.refresh_token!)).revoked_reason).toBe('reuse_detected');
        seen.revoked++;
      }
    }
    expect(seen.retryFirst + seen.revoked).toBe(12);
  });
});

describe('a retry across two instances sharing one database', () => {
  let database: TestDatabase;
  let instances: TestApp[];

  beforeAll(async () => {
    database = await createTestDatabase();
    instances = [await startTestApp({ database }), await startTestApp({ database })];
    instances[1]!.clock.advance((instances[0]!.clock.now().getTime() - instances[1]!.clock.now().getTime()) / 1000);
  });
  afterAll(async () => {
    for (const instance of instances) await instance.close();
    await database.drop();
  });

  it('the answer lost from one instance is given again by the other, and concurrent retries on both agree', async () => {
    const [a, b] = instances as [TestApp, TestApp];
    const app = await seedClient(a, { kind: 'tv' });
    const owner = await seedUser(a);
    const first = await signIn(a, app, owner.userId, ALL);
    const lost = await refreshed(a, app, first.refresh_token!);
    const again = await refreshed(b, app, first.refresh_token!);
    expect([again.refresh_token, again.access_token]).toEqual([lost.refresh_token, lost.access_token]);

    const both = await Promise.all(Array.from({ length: 6 }, (_, i) => refresh(instances[i % 2]!, app, first.refresh_token!)));
    expect(both.map((r) => r.statusCode)).toEqual(Array(6).fill(200));
    expect(new Set(both.map((r) => (r.json() as TokenSet).refresh_token))).toEqual(new Set([lost.refresh_token]));
    const grant = await grantOf(a, first.refresh_token!);
    expect(await liveAmong(a, grant.grant_id, [first.refresh_token!, lost.refresh_token!])).toEqual([lost.refresh_token]);
  });
});
