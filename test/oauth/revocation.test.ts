import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mintOpaque, TOKEN_PREFIX } from '../../src/oauth/opaque-tokens.js';
import { FORM, basicAuth, form, type TestApp } from '../helpers/app.js';
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
  rotatedGrant as rotatedGrantOf,
  signIn,
  startWithClients,
  userinfo,
  type RotatedGrant,
  type TestClient,
} from '../helpers/tokens.js';

let t: TestApp;
let tv: TestClient;
let bot: TestClient;
let web: TestClient;
let rs: TestClient;
let user: { userId: string };

beforeAll(async () => {
  ({ t, tv, bot, web, rs, user } = await startWithClients());
});
afterAll(() => t.close());

const rotatedGrant = (client: TestClient) => rotatedGrantOf(t, client, user.userId);

function expectEmpty200(res: Awaited<ReturnType<typeof revoke>>) {
  expect(res.statusCode).toBe(200);
  expect(res.json()).toEqual({});
  expect(res.headers['cache-control']).toBe('no-store');
}

describe('POST /oauth/revoke (RFC 7009)', () => {
  it.each([
    ['the current refresh token', (c: RotatedGrant) => c.second.refresh_token!, undefined],
    ['the replaced refresh token', (c: RotatedGrant) => c.first.refresh_token!, undefined],
    ['the current access token', (c: RotatedGrant) => c.second.access_token, undefined],
    ['an earlier access token', (c: RotatedGrant) => c.first.access_token, undefined],
    ['an access token with token_type_hint=refresh_token (RFC 7009 §2.1: the hint only helps)', (c: RotatedGrant) => c.second.access_token, 'refresh_token'],
    ['a refresh token with an unsupported token_type_hint, which is ignored', (c: RotatedGrant) => c.second.refresh_token!, 'id_token'],
  ])('revoking %s revokes the whole rotated: 200 {} and every token of it stops', async (_name, pick, hint) => {
    const rotated = await rotatedGrant(tv);
    expectEmpty200(await revoke(t, tv, pick(rotated), hint));

    const grant = await grantOf(t, rotated.second.refresh_token!);
    // For tv and bot apps, a revoked grant is one the user no longer sees on the Devices page.
    expect(grant).toMatchObject({ revoked_reason: 'revoked_by_app' });
    expect((await eventsOf(t, grant.grant_id)).at(-1)).toEqual({ type: 'grant.revoked', reason: 'revoked_by_app', client_ip: '127.0.0.1' });
    await expectAllRefused(t, rs, tv, {
      access: [rotated.first.access_token, rotated.second.access_token],
      refresh: [rotated.second.refresh_token!],
    });
  });

  it('a confidential bot revokes with HTTP Basic', async () => {
    const rotated = await rotatedGrant(bot);
    expectEmpty200(await revoke(t, bot, rotated.second.refresh_token!));
    expect((await grantOf(t, rotated.second.refresh_token!)).revoked_reason).toBe('revoked_by_app');
  });

  it('a web app revokes its access token (it has no refresh token)', async () => {
    const tokens = await signIn(t, web, user.userId, 'openid profile');
    expectEmpty200(await revoke(t, web, tokens.access_token));
    expect(await introspection(t, rs, tokens.access_token)).toEqual({ active: false });
  });

  it('"at once": the very next introspection, userinfo and refresh after a revocation fail', async () => {
    const tokens = await signIn(t, tv, user.userId, ALL);
    expect((await userinfo(t, tokens.access_token)).statusCode).toBe(200);
    expect(await introspection(t, rs, tokens.access_token)).toMatchObject({ active: true });

    expectEmpty200(await revoke(t, tv, tokens.refresh_token!));

    expect(await introspection(t, rs, tokens.access_token)).toEqual({ active: false });
    expect((await userinfo(t, tokens.access_token)).statusCode).toBe(401);
    expect((await refresh(t, tv, tokens.refresh_token!)).json().error).toBe('invalid_grant');
  });
});

describe('a revoked rotated keeps no access token', () => {
  const accessTokensOf = async (grantId: string) =>
    (await t.deps.db.selectFrom('access_tokens').select('grant_id').where('grant_id', '=', grantId).execute()).length;

  it('revoking a rotated deletes every access token it was given', async () => {
    const rotated = await rotatedGrant(tv);
    const grant = await grantOf(t, rotated.second.refresh_token!);
    expect(await accessTokensOf(grant.grant_id)).toBe(2);
    expectEmpty200(await revoke(t, tv, rotated.second.refresh_token!));
    expect(await accessTokensOf(grant.grant_id)).toBe(0);
  });

  /**
   * A rotation holds its grant's row while it adds the grant's next access token. Another
   * connection plays that rotation here: it locks the grant, adds an access token and commits
   * once the revocation waits on the lock. The revocation must delete that token too.
   */
  it.skipIf(!process.env.TEST_DATABASE_URL)('an access token committed while the revocation waited on its rotated is deleted too', async () => {
    const tokens = await signIn(t, tv, user.userId, ALL);
    const grant = await grantOf(t, tokens.refresh_token!);
    const late = mintOpaque(TOKEN_PREFIX.accessToken);
    const holder = await holdLocks(t.database.url!);
    await holder.query('UPDATE grants SET last_used_at = now() WHERE grant_id = $1', [grant.grant_id]);
    await holder.query(
      `INSERT INTO access_tokens (token_hash, grant_id, user_id, client_id, scopes, created_at, expires_at)
       SELECT $1, grant_id, user_id, client_id, scopes, now(), now() + interval '1 hour' FROM grants WHERE grant_id = $2`,
      [late.hash, grant.grant_id],
    );
    const revoking = revoke(t, tv, tokens.refresh_token!);
    await holder.commitWhenWaiting(1);
    expectEmpty200(await revoking);

    expect(await accessTokensOf(grant.grant_id)).toBe(0);
    expect(await introspection(t, rs, late.value)).toEqual({ active: false });
    expect((await userinfo(t, late.value)).statusCode).toBe(401);
  });
});

describe('RFC 7009 §2.2: 200 {} whatever the token, so revocation tells nothing about tokens', () => {
  it.each([
    ['an unknown token', async () => 'da_rt_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA'],
    ['a malformed token', async () => 'not-a-token\u00e9'],
    ['an overlong token', async () => `da_at_${'A'.repeat(5000)}`],
    [
      'an expired token',
      async () => {
        const tokens = await signIn(t, tv, user.userId);
        t.clock.advance(5_184_000);
        return tokens.refresh_token!;
      },
    ],
    [
      'an already revoked token',
      async () => {
        const tokens = await signIn(t, tv, user.userId);
        expectEmpty200(await revoke(t, tv, tokens.access_token));
        return tokens.access_token;
      },
    ],
  ])('%s', async (_name, token) => {
    expectEmpty200(await revoke(t, tv, await token()));
  });

  it("another app's token: 200 {} and the token stays live", async () => {
    const theirs = await rotatedGrant(bot);
    for (const token of [theirs.second.access_token, theirs.second.refresh_token!, theirs.first.refresh_token!]) {
      expectEmpty200(await revoke(t, tv, token));
    }
    expect((await grantOf(t, theirs.second.refresh_token!)).revoked_at).toBeNull();
    expect(await introspection(t, rs, theirs.second.access_token)).toMatchObject({ active: true });
    await refreshed(t, bot, theirs.second.refresh_token!);
  });
});

describe('POST /oauth/revoke refuses bad requests', () => {
  it('RFC 7009 §2.1: a missing token is invalid_request', async () => {
    for (const fields of [{ client_id: tv.clientId }, { client_id: tv.clientId, token: '' }]) {
      const res = await t.app.inject({ method: 'POST', url: '/oauth/revoke', headers: FORM, payload: form(fields) });
      expect(res.statusCode).toBe(400);
      expect(res.json().error).toBe('invalid_request');
    }
  });

  it.each([
    ['no client authentication', { token: 'da_rt_x' }, {}],
    ['an unknown client_id', { token: 'da_rt_x', client_id: 'tv_nobody' }, {}],
    ['a confidential client without its secret', () => ({ token: 'da_rt_x', client_id: bot.clientId }), {}],
    ['a wrong client secret', () => ({ token: 'da_rt_x' }), () => ({ authorization: basicAuth(bot.clientId, 'wrong') })],
  ])('RFC 7009 §2.1: %s is 401 invalid_client', async (_name, fields, headers) => {
    const res = await t.app.inject({
      method: 'POST',
      url: '/oauth/revoke',
      headers: { ...FORM, ...(typeof headers === 'function' ? headers() : headers) },
      payload: form(typeof fields === 'function' ? fields() : fields),
    });
    expect(res.statusCode).toBe(401);
    expect(res.json().error).toBe('invalid_client');
    expect(res.headers['www-authenticate']).toMatch(/^Basic/);
  });

  it('a bad client leaves the token alone', async () => {
    const tokens = await signIn(t, bot, user.userId);
    const res = await t.app.inject({
      method: 'POST',
      url: '/oauth/revoke',
      headers: { ...FORM, authorization: basicAuth(bot.clientId, 'wrong') },
      payload: form({ token: tokens.refresh_token }),
    });
    expect(res.statusCode).toBe(401);
    expect((await grantOf(t, tokens.refresh_token!)).revoked_at).toBeNull();
  });
});
