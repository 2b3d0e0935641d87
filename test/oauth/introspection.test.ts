import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { banUser, unbanUser } from '../../src/accounts/bans.js';
import { setClientDisabledAt } from '../../src/repositories/clients.js';
import { FORM, basicAuth, form, seedClient, seedUser, type TestApp } from '../helpers/app.js';
import { decide, poll, requestDeviceCode, startDeviceFlow } from '../helpers/device.js';
import { holdLocks } from '../helpers/lock-holder.js';
import {
  ALL_SCOPES as ALL,
  expectAllRefused,
  grantOf,
  introspection,
  postAs,
  refresh,
  refreshed,
  revoke,
  signIn,
  startWithClients,
  userinfo,
  type TestClient,
} from '../helpers/tokens.js';

let t: TestApp;
let tv: TestClient;
let rs: TestClient;
let user: { userId: string; email: string };

beforeAll(async () => {
  ({ t, tv, rs, user } = await startWithClients());
});
afterAll(() => t.close());

describe('POST /oauth/introspect (RFC 7662)', () => {
  it('RFC 7662 §2.2: a live access token is active, with scope, client_id, sub, sid, token_type, exp, iat, aud and iss', async () => {
    const issuedAt = Math.floor(t.clock.now().getTime() / 1000);
    const tokens = await signIn(t, tv, user.userId, ALL);
    const res = await postAs(t, rs, '/oauth/introspect', { token: tokens.access_token });
    expect(res.statusCode).toBe(200);
    expect(res.headers['cache-control']).toBe('no-store');
    const body = res.json();
    expect(body).toEqual({
      active: true,
      scope: ALL,
      client_id: tv.clientId,
      sub: user.userId,
      sid: (await grantOf(t, tokens.access_token)).grant_id,
      token_type: 'Bearer',
      exp: body.iat + 3600,
      iat: expect.any(Number),
      aud: tv.clientId,
      iss: 'http://localhost:3000',
    });
    // The flow's poll waits one interval after the code is issued.
    expect(body.iat - issuedAt).toBe(5);
  });

  it('an access token from a refresh is active with the scope it was given', async () => {
    const first = await signIn(t, tv, user.userId, ALL);
    const second = await refreshed(t, tv, first.refresh_token!, 'openid');
    expect(await introspection(t, rs, second.access_token)).toMatchObject({ active: true, scope: 'openid' });
  });

  /** Each returns an access token that must now be refused, or another token that never was one. */
  it.each([
    ['an unknown token', async () => 'da_at_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA'],
    ['a malformed token', async () => 'hello world'],
    ['a refresh token (introspection answers for access tokens only)', async () => (await signIn(t, tv, user.userId)).refresh_token!],
    [
      'an expired access token',
      async () => {
        const tokens = await signIn(t, tv, user.userId);
        t.clock.advance(3600);
        return tokens.access_token;
      },
    ],
    [
      'a revoked access token',
      async () => {
        const tokens = await signIn(t, tv, user.userId);
        await revoke(t, tv, tokens.refresh_token!);
        return tokens.access_token;
      },
    ],
    [
      "a banned user's access token",
      async () => {
        const owner = await seedUser(t);
        const tokens = await signIn(t, tv, owner.userId);
        await banUser(t.deps.db, owner.email, t.clock.now());
        return tokens.access_token;
      },
    ],
    [
      "a disabled app's access token",
      async () => {
        const app = await seedClient(t, { kind: 'tv' });
        const tokens = await signIn(t, app, user.userId);
        await setClientDisabledAt(t.deps.db, app.clientId, t.clock.now());
        return tokens.access_token;
      },
    ],
  ])('RFC 7662 §2.2: %s is {active: false} and nothing else; userinfo refuses it too', async (_name, token) => {
    const value = await token();
    expect(await introspection(t, rs, value)).toEqual({ active: false });
    const res = await userinfo(t, value);
    expect(res.statusCode).toBe(401);
    expect(res.headers['www-authenticate']).toContain('error="invalid_token"');
  });

  it.each([
    ['a public client (client_id only)', () => ({ client_id: tv.clientId }), () => ({})],
    ['no client authentication', () => ({}), () => ({})],
    ['a wrong client secret', () => ({}), () => ({ authorization: basicAuth(rs.clientId, 'wrong') })],
    ['an unknown client', () => ({}), () => ({ authorization: basicAuth('web_nobody', 'x') })],
  ])('RFC 7662 §2.1: %s is 401 invalid_client', async (_name, fields, headers) => {
    const tokens = await signIn(t, tv, user.userId);
    const res = await t.app.inject({
      method: 'POST',
      url: '/oauth/introspect',
      headers: { ...FORM, ...headers() },
      payload: form({ token: tokens.access_token, ...fields() }),
    });
    expect(res.statusCode).toBe(401);
    expect(res.json().error).toBe('invalid_client');
    expect(res.headers['www-authenticate']).toMatch(/^Basic/);
  });

  it('a confidential web app registered with introspection: true is a resource server and may introspect', async () => {
    const server = await seedClient(t, { kind: 'web', type: 'confidential', name: 'Music API', introspection: true });
    const tokens = await signIn(t, tv, user.userId);
    expect(await introspection(t, server, tokens.access_token)).toMatchObject({ active: true, sub: user.userId });
  });

  it('a confidential web app registered only to sign users in (no introspection asked) may not introspect: 403 (issue 28 §4)', async () => {
    const { createClient } = await import('../../src/apps/registration.js');
    const created = await createClient(t.deps.db, { name: 'Shop', kind: 'web', type: 'confidential', scopes: ['openid'] });
    expect(created.introspection).toBe(false);
    const tokens = await signIn(t, tv, user.userId);
    const res = await postAs(t, { clientId: created.client_id, clientSecret: created.client_secret }, '/oauth/introspect', { token: tokens.access_token });
    expect(res.statusCode).toBe(403);
    expect(res.json().error).toBe('unauthorized_client');
  });

  it.each([
    ['a bot app', { kind: 'bot', type: 'confidential' }],
    ['a confidential tv app', { kind: 'tv', type: 'confidential' }],
    ['a web app created without the permission', { kind: 'web', type: 'confidential', introspection: false }],
  ] as const)(
    'RFC 7662 §4: %s, authenticated, is refused with 403 unauthorized_client, the same answer for a live and an unknown token',
    async (_name, registration) => {
      const caller = await seedClient(t, registration);
      const live = (await signIn(t, tv, user.userId, ALL)).access_token;
      const answers = [];
      for (const token of [live, 'da_at_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA']) {
        const res = await postAs(t, caller, '/oauth/introspect', { token });
        answers.push({ status: res.statusCode, body: res.body, cacheControl: res.headers['cache-control'] });
      }
      expect(answers[0]).toEqual(answers[1]);
      expect(answers[0]!.status).toBe(403);
      expect(answers[0]!.cacheControl).toBe('no-store');
      expect(JSON.parse(answers[0]!.body)).toEqual({
        error: 'unauthorized_client',
        error_description: 'this client is not registered as a resource server and may not introspect tokens',
      });
    },
  );

  it('a bot app with a wrong secret still hears 401 invalid_client, not the 403 of an authenticated one', async () => {
    const caller = await seedClient(t, { kind: 'bot', type: 'confidential' });
    const res = await postAs(t, { clientId: caller.clientId, clientSecret: 'dacs_wrong' }, '/oauth/introspect', { token: 'da_at_x' });
    expect(res.statusCode).toBe(401);
    expect(res.json().error).toBe('invalid_client');
  });

  it.each([
    ['bot', 'confidential'],
    ['tv', 'confidential'],
    ['web', 'public'],
  ] as const)('a %s %s app cannot be registered as a resource server', async (kind, type) => {
    await expect(seedClient(t, { kind, type, introspection: true })).rejects.toThrow(/only a confidential web app/);
  });

  it('RFC 7662 §2.1: a missing token is invalid_request', async () => {
    const res = await postAs(t, rs, '/oauth/introspect', {});
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toBe('invalid_request');
  });
});

const startRaw = (clientId: string) => requestDeviceCode(t, { client_id: clientId });

describe('a disabled app (device-auth client disable)', () => {
  it('its token requests fail with invalid_client and its tokens are inactive', async () => {
    const app = await seedClient(t, { kind: 'tv' });
    const tokens = await signIn(t, app, user.userId, ALL);
    await setClientDisabledAt(t.deps.db, app.clientId, t.clock.now());

    expect(await introspection(t, rs, tokens.access_token)).toEqual({ active: false });
    const res = await refresh(t, app, tokens.refresh_token!);
    expect(res.statusCode).toBe(401);
    expect(res.json().error).toBe('invalid_client');
  });

  it.each([
    ['a device poll', (app: { clientId: string }) => poll(t, app.clientId, 'da_dc_unknown')],
    ['a refresh with an unknown token', (app: { clientId: string }) => refresh(t, { clientId: app.clientId, clientSecret: null }, 'da_rt_unknown')],
    ['a device code request', (app: { clientId: string }) => startRaw(app.clientId)],
  ])('the very next %s after disabling is invalid_client (the cached client does not outlive the flag)', async (_name, request) => {
    const app = await seedClient(t, { kind: 'tv' });
    // Warm the in-memory client directory first.
    expect((await startRaw(app.clientId)).statusCode).toBe(200);
    await setClientDisabledAt(t.deps.db, app.clientId, t.clock.now());
    const res = await request(app);
    expect(res.statusCode).toBe(401);
    expect(res.json().error).toBe('invalid_client');
  });

  it('a disabled resource server may not introspect', async () => {
    const server = await seedClient(t, { kind: 'web', type: 'confidential', name: 'Old API' });
    const tokens = await signIn(t, tv, user.userId, ALL);
    expect(await introspection(t, server, tokens.access_token)).toMatchObject({ active: true });
    await setClientDisabledAt(t.deps.db, server.clientId, t.clock.now());
    const res = await postAs(t, server, '/oauth/introspect', { token: tokens.access_token });
    expect(res.statusCode).toBe(401);
    expect(res.json().error).toBe('invalid_client');
  });
});

describe('a banned user', () => {
  it('refresh is invalid_grant and introspection inactive; unbanning revives no old token', async () => {
    const owner = await seedUser(t);
    const tokens = await signIn(t, tv, owner.userId, ALL);
    expect(await banUser(t.deps.db, owner.email, t.clock.now())).toMatchObject({ revoked_grants: 1 });
    const dead = { access: [tokens.access_token], refresh: [tokens.refresh_token!] };
    await expectAllRefused(t, rs, tv, dead);

    expect(await unbanUser(t.deps.db, owner.email)).not.toBeNull();
    await expectAllRefused(t, rs, tv, dead);
    // Signing in again after the unban works and gives new tokens.
    expect(await introspection(t, rs, (await signIn(t, tv, owner.userId)).access_token)).toMatchObject({ active: true });
  });

  it('a device whose user was banned between approval and its poll gets access_denied, not tokens', async () => {
    const owner = await seedUser(t);
    const flow = await startDeviceFlow(t, tv.clientId);
    expect(await decide(t, flow.user_code, owner.userId, 'approve')).toBe('approved');
    await banUser(t.deps.db, owner.email, t.clock.now());
    t.clock.advance(flow.interval);
    const res = await poll(t, tv.clientId, flow.device_code);
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toBe('access_denied');
    const grants = await t.deps.db.selectFrom('grants').select('grant_id').where('user_id', '=', owner.userId).execute();
    expect(grants).toEqual([]);
  });

  /**
   * The live-token check does not read the user: a ban deletes its user's tokens. These two races
   * prove no token escapes a ban through an issuance in flight. A second connection plays one
   * side and holds its locks until the other side waits on them.
   */
  describe.skipIf(!process.env.TEST_DATABASE_URL)('a ban racing the poll that redeems an approval', () => {
    const approvedFlow = async () => {
      const owner = await seedUser(t);
      const flow = await startDeviceFlow(t, tv.clientId, { scope: ALL });
      expect(await decide(t, flow.user_code, owner.userId, 'approve')).toBe('approved');
      t.clock.advance(flow.interval);
      return { owner, flow };
    };
    const accessTokensOf = (userId: string) => t.deps.db.selectFrom('access_tokens').select('token_hash').where('user_id', '=', userId).execute();

    it('a ban that updated the user first makes the redemption wait for it, then answer access_denied', async () => {
      const { owner, flow } = await approvedFlow();
      const holder = await holdLocks(t.database.url!);
      await holder.query('UPDATE users SET banned_at = now() WHERE user_id = $1', [owner.userId]);
      const polling = poll(t, tv.clientId, flow.device_code);
      await holder.commitWhenWaiting(1);
      const res = await polling;
      expect(res.statusCode, res.body).toBe(400);
      expect(res.json().error).toBe('access_denied');
      expect(await accessTokensOf(owner.userId)).toEqual([]);
    });

    it('a ban that comes while the redemption is under way waits for it, then revokes the new grant', async () => {
      const { owner, flow } = await approvedFlow();
      // Holds the redemption after it has read its user: inserting the grant checks the app's row.
      const holder = await holdLocks(t.database.url!);
      await holder.query('SELECT 1 FROM clients WHERE client_id = $1 FOR UPDATE', [tv.clientId]);
      const polling = poll(t, tv.clientId, flow.device_code);
      await holder.waitForWaiters(1);
      const banning = banUser(t.deps.db, owner.email, t.clock.now());
      await holder.commitWhenWaiting(2);
      const res = await polling;
      expect(res.statusCode, res.body).toBe(200);
      expect(await banning).toMatchObject({ revoked_grants: 1 });
      const tokens = res.json();
      await expectAllRefused(t, rs, tv, { access: [tokens.access_token], refresh: [tokens.refresh_token] });
      expect(await accessTokensOf(owner.userId)).toEqual([]);
    });
  });
});
