import { createLocalJWKSet, jwtVerify } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { banUser } from '../../src/accounts/bans.js';
import { hashOpaque } from '../../src/oauth/opaque-tokens.js';
import { seedClient, seedUser, type TestApp } from '../helpers/app.js';
import { holdLocks } from '../helpers/lock-holder.js';
import {
  ALL_SCOPES as ALL,
  eventsOf,
  expectAllRefused,
  introspection,
  grantOf,
  refresh,
  refreshed,
  revoke,
  rotatedGrant,
  signIn,
  startWithClients,
  type RotatedGrant,
  type TestClient,
  type TokenSet,
} from '../helpers/tokens.js';

let t: TestApp;
let tv: TestClient;
let bot: TestClient;
let rs: TestClient;
let user: { userId: string; email: string };

beforeAll(async () => {
  ({ t, tv, bot, rs, user } = await startWithClients());
});
afterAll(() => t.close());

const hex = (bytes: Uint8Array | null | undefined) => (bytes ? Buffer.from(bytes).toString('hex') : null);

/** The refresh token the grant names as current (hex of its hash), and how many the grant was ever given. */
async function refreshTokensOf(grantId: string): Promise<{ current: string | null; issued: number }> {
  const grant = await t.deps.db.selectFrom('grants').select('current_refresh_hash').where('grant_id', '=', grantId).executeTakeFirstOrThrow();
  const issued = await t.deps.db.selectFrom('refresh_tokens').select('token_hash').where('grant_id', '=', grantId).execute();
  return { current: hex(grant.current_refresh_hash), issued: issued.length };
}

describe('POST /oauth/token with grant_type=refresh_token (RFC 6749 §6)', () => {
  it('rotates: a new access token, refresh token and ID token; the presented one becomes old', async () => {
    const first = await signIn(t, tv, user.userId, ALL);
    t.clock.advance(60);
    const res = await refresh(t, tv, first.refresh_token!);
    expect(res.statusCode).toBe(200);
    expect(res.headers['cache-control']).toBe('no-store');
    const second: TokenSet = res.json();
    expect(second).toMatchObject({ token_type: 'Bearer', expires_in: 3600, scope: ALL });
    expect(second.access_token).toMatch(/^da_at_/);
    expect(second.refresh_token).toMatch(/^da_rt_/);
    expect(second.access_token).not.toBe(first.access_token);
    expect(second.refresh_token).not.toBe(first.refresh_token);
    expect(typeof second.id_token).toBe('string');

    const grant = await grantOf(t, second.refresh_token!);
    expect(grant.last_used_at).toEqual(t.clock.now());
    // The grant lives as long as its newest refresh token.
    expect(grant.expires_at).toEqual(new Date(t.clock.now().getTime() + 5_184_000_000));
    expect(await refreshTokensOf(grant.grant_id)).toEqual({ current: hex(hashOpaque(second.refresh_token!)), issued: 2 });
    expect(await eventsOf(t, grant.grant_id)).toEqual([
      { type: 'grant.issued', reason: 'device_code', client_ip: '127.0.0.1' },
      { type: 'grant.rotated', reason: null, client_ip: '127.0.0.1' },
    ]);
    expect(await introspection(t, rs, second.access_token)).toMatchObject({ active: true, scope: ALL });
  });

  it('each successor rotates in turn; a confidential bot refreshes with HTTP Basic', async () => {
    let tokens = await signIn(t, bot, user.userId, 'profile offline_access');
    for (let i = 0; i < 3; i++) {
      t.clock.advance(3600);
      tokens = await refreshed(t, bot, tokens.refresh_token!);
    }
    expect(tokens.scope).toBe('profile offline_access');
    expect(await refreshTokensOf((await grantOf(t, tokens.refresh_token!)).grant_id)).toEqual({ current: hex(hashOpaque(tokens.refresh_token!)), issued: 4 });
  });

  it('a refresh slides the expiry: a grant used every 59 days outlives REFRESH_TOKEN_TTL', async () => {
    let tokens = await signIn(t, tv, user.userId);
    for (let i = 0; i < 2; i++) {
      t.clock.advance(59 * 86_400);
      tokens = await refreshed(t, tv, tokens.refresh_token!);
    }
  });

  it.each([
    ['after REFRESH_TOKEN_TTL (60 days), the refresh token has expired', 5_184_000],
    ['long after REFRESH_TOKEN_TTL', 10 * 5_184_000],
  ])('invalid_grant %s', async (_name, seconds) => {
    const tokens = await signIn(t, tv, user.userId);
    t.clock.advance(seconds);
    const res = await refresh(t, tv, tokens.refresh_token!);
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toBe('invalid_grant');
  });

  it.each([
    ['an unknown refresh token', 'da_rt_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA'],
    ['a malformed refresh token', 'not a token'],
    ['an access token presented as a refresh token', null],
  ])('invalid_grant for %s', async (_name, token) => {
    const tokens = await signIn(t, tv, user.userId);
    const res = await refresh(t, tv, token ?? tokens.access_token);
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toBe('invalid_grant');
    // The grant is not touched by a token that is not of it.
    expect(await refresh(t, tv, tokens.refresh_token!)).toHaveProperty('statusCode', 200);
  });

  it("another client's refresh token is invalid_grant and is NOT revoked: its owner refreshes on", async () => {
    const other = await seedClient(t, { kind: 'tv', name: 'Kitchen TV' });
    const tokens = await signIn(t, tv, user.userId);
    const stolen = await refresh(t, other, tokens.refresh_token!);
    expect(stolen.statusCode).toBe(400);
    expect(stolen.json().error).toBe('invalid_grant');
    expect((await grantOf(t, tokens.refresh_token!)).revoked_at).toBeNull();
    await refreshed(t, tv, tokens.refresh_token!);
  });

  it('a missing refresh_token is invalid_request', async () => {
    const res = await refresh(t, tv, '');
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toBe('invalid_request');
  });
});

describe('the end of a grant: every refresh and access token of it stops at once', () => {
  const ok = (res: { statusCode: number }) => expect(res.statusCode).toBe(200);

  /** Each ends a grant that has rotated once (first -> second). */
  it.each([
    {
      how: 'the replaced refresh token is presented again after the retry window: invalid_grant, grant revoked (RFC 9700 §4.14.2)',
      end: async ({ first }: RotatedGrant) => {
        t.clock.advance(t.deps.config.refreshRetryWindow + 1);
        expect((await refresh(t, tv, first.refresh_token!)).json().error).toBe('invalid_grant');
      },
      reason: 'reuse_detected',
      ip: '127.0.0.1',
    },
    {
      how: 'the app revokes the current refresh token (RFC 7009 §2.1)',
      end: async ({ second }: RotatedGrant) => ok(await revoke(t, tv, second.refresh_token!)),
      reason: 'revoked_by_app',
      ip: '127.0.0.1',
    },
    {
      how: 'the app revokes the replaced refresh token (RFC 7009 §2.1)',
      end: async ({ first }: RotatedGrant) => ok(await revoke(t, tv, first.refresh_token!)),
      reason: 'revoked_by_app',
      ip: '127.0.0.1',
    },
    {
      how: 'the app revokes an access token (RFC 7009 §2.1)',
      end: async ({ first }: RotatedGrant) => ok(await revoke(t, tv, first.access_token)),
      reason: 'revoked_by_app',
      ip: '127.0.0.1',
    },
    {
      how: 'the user is banned',
      end: async ({ owner }: RotatedGrant & { owner: { email: string } }) => expect(await banUser(t.deps.db, owner.email, t.clock.now())).not.toBeNull(),
      reason: 'user_banned',
      ip: null,
    },
  ])('$how', async ({ end, reason, ip }) => {
    const owner = await seedUser(t);
    const { first, second } = await rotatedGrant(t, tv, owner.userId);
    expect(await introspection(t, rs, second.access_token)).toMatchObject({ active: true });

    await end({ first, second, owner });

    await expectAllRefused(t, rs, tv, {
      access: [first.access_token, second.access_token],
      refresh: [second.refresh_token!, first.refresh_token!],
    });
    const grant = await grantOf(t, second.refresh_token!);
    expect(grant.revoked_at).not.toBeNull();
    expect(grant.revoked_reason).toBe(reason);
    expect((await eventsOf(t, grant.grant_id)).filter((e) => e.type === 'grant.revoked')).toEqual([{ type: 'grant.revoked', reason, client_ip: ip }]);
  });
});

describe('scope on refresh (RFC 6749 §6: may narrow, never widen)', () => {
  it('a narrowed scope holds for the rest of the grant', async () => {
    const first = await signIn(t, tv, user.userId, ALL);
    const narrowed = await refreshed(t, tv, first.refresh_token!, 'openid profile');
    expect(narrowed.scope).toBe('openid profile');
    expect(await introspection(t, rs, narrowed.access_token)).toMatchObject({ active: true, scope: 'openid profile' });

    const later = await refreshed(t, tv, narrowed.refresh_token!);
    expect(later.scope).toBe('openid profile');
    expect((await grantOf(t, later.refresh_token!)).scopes).toEqual(['openid', 'profile']);

    // What was given up cannot be had back.
    const back = await refresh(t, tv, later.refresh_token!, 'openid profile email');
    expect(back.statusCode).toBe(400);
    expect(back.json().error).toBe('invalid_scope');
  });

  it('a wider scope is invalid_scope, rotates nothing and revokes nothing', async () => {
    const first = await signIn(t, tv, user.userId, 'openid profile');
    const res = await refresh(t, tv, first.refresh_token!, 'openid profile email');
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ error: 'invalid_scope', error_description: expect.stringContaining('email') });
    // The presented token is still the current one.
    expect((await refreshed(t, tv, first.refresh_token!)).scope).toBe('openid profile');
  });

  it('an empty scope keeps the grant scopes', async () => {
    const first = await signIn(t, tv, user.userId, 'profile email');
    expect((await refreshed(t, tv, first.refresh_token!, '')).scope).toBe('profile email');
  });
});

describe('ID token on refresh (OpenID Connect Core §12.2)', () => {
  it('a new ID token with openid: same sub and auth_time, fresh iat, verifiable with the JWKS', async () => {
    const first = await signIn(t, tv, user.userId, 'openid email');
    t.clock.advance(600);
    const second = await refreshed(t, tv, first.refresh_token!);
    const jwks = createLocalJWKSet((await t.app.inject({ method: 'GET', url: '/.well-known/jwks.json' })).json());
    const options = { issuer: 'http://localhost:3000', audience: tv.clientId, currentDate: t.clock.now() };
    const before = (await jwtVerify(first.id_token!, jwks, options)).payload;
    const after = (await jwtVerify(second.id_token!, jwks, options)).payload;
    expect(after.sub).toBe(user.userId);
    expect(after.auth_time).toBe(before.auth_time);
    // The same session: the grant's, which a Shared Signals session-revoked names (issue 32 §3).
    expect(after.sid).toBe((await grantOf(t, second.access_token)).grant_id);
    expect(after.sid).toBe(before.sid);
    expect(after.iat! - before.iat!).toBe(600);
    expect(after.email).toBe(user.email);
  });

  it.each([
    ['a grant without openid', 'profile offline_access', undefined],
    ['a refresh that narrows openid away', ALL, 'profile'],
  ])('no ID token for %s', async (_name, scope, narrowTo) => {
    const first = await signIn(t, tv, user.userId, scope);
    const second = await refreshed(t, tv, first.refresh_token!, narrowTo);
    expect(second.id_token).toBeUndefined();
  });
});

describe('racing refreshes with the same token', () => {
  /**
   * On PostgreSQL a second connection holds the token's row lock until every request is waiting
   * on it, so all of them read the token as current and then contend for the rotation. The
   * embedded database has one connection and runs them one after another.
   */
  async function holdTokenRow(token: string): Promise<(waiters: number) => Promise<void>> {
    if (!t.database.url) return async () => {};
    const holder = await holdLocks(t.database.url);
    // A rotation waits on its grant's row, which names the current token.
    await holder.query('SELECT 1 FROM grants WHERE grant_id = (SELECT grant_id FROM refresh_tokens WHERE token_hash = $1) FOR UPDATE', [hashOpaque(token)]);
    return (waiters) => holder.commitWhenWaiting(waiters);
  }

  /**
   * Exactly one rotation happens. The others are retries of it within the window (a client that
   * sent its refresh twice, or whose first answer was lost), so all get the winner's answer: one
   * live successor, and the device stays signed in.
   */
  it('exactly one rotation; every racer gets the same answer and the grant stays live', async () => {
    const tokens = await signIn(t, tv, user.userId, ALL);
    const grant = await grantOf(t, tokens.refresh_token!);
    const release = await holdTokenRow(tokens.refresh_token!);
    const racing = Promise.all(Array.from({ length: 8 }, () => refresh(t, tv, tokens.refresh_token!)));
    await release(8);
    const results = await racing;

    expect(results.map((r) => r.statusCode)).toEqual(Array(8).fill(200));
    const answers: TokenSet[] = results.map((r) => r.json());
    const won = answers[0]!;
    for (const answer of answers) {
      expect(answer.refresh_token).toBe(won.refresh_token);
      expect(answer.access_token).toBe(won.access_token);
    }
    expect(await refreshTokensOf(grant.grant_id)).toEqual({ current: hex(hashOpaque(won.refresh_token!)), issued: 2 });
    expect((await eventsOf(t, grant.grant_id)).map((e) => `${e.type} ${e.reason}`)).toEqual([
      'grant.issued device_code',
      'grant.rotated null',
      ...Array(7).fill('grant.retried null'),
    ]);
    expect(await grantOf(t, tokens.refresh_token!)).toMatchObject({ revoked_at: null });
    await refreshed(t, tv, won.refresh_token!);
  });
});
