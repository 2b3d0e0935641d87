import { createLocalJWKSet, jwtVerify } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basicAuth, seedClient, seedUser, startTestApp, type TestApp } from '../helpers/app.js';
import { decide, poll, requestDeviceCode, startDeviceFlow } from '../helpers/device.js';
import { grantOf } from '../helpers/tokens.js';
import { setClientDisabledAt } from '../../src/repositories/clients.js';
import { hashOpaque } from '../../src/oauth/opaque-tokens.js';
import { userCodeHmac } from '../../src/oauth/device/user-code.js';
import { findDeviceRequestByUserCode, insertDeviceRequest } from '../../src/repositories/device-requests.js';

let t: TestApp;
let tv: { clientId: string };
let bot: { clientId: string; clientSecret: string | null };
let web: { clientId: string };
let user: { userId: string; email: string };

beforeAll(async () => {
  t = await startTestApp();
  tv = await seedClient(t, { kind: 'tv' });
  bot = await seedClient(t, { kind: 'bot', type: 'confidential', name: 'Helper Bot' });
  web = await seedClient(t, { kind: 'web', scopes: ['openid', 'profile'] });
  user = await seedUser(t);
});
afterAll(() => t.close());

/** Moves the test clock past the poll interval, as a well-behaved device waits. */
const wait = (seconds: number) => t.clock.advance(seconds);

describe('POST /oauth/device/code (RFC 8628 §3.1, §3.2)', () => {
  it('answers the device authorization response plus a confirmation phrase, uncached', async () => {
    const res = await requestDeviceCode(t, { client_id: tv.clientId, scope: 'openid profile' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['cache-control']).toBe('no-store');
    const body = res.json();
    expect(Object.keys(body).sort()).toEqual(
      ['confirmation_phrase', 'device_code', 'expires_in', 'interval', 'user_code', 'verification_uri', 'verification_uri_complete'].sort(),
    );
    expect(body.user_code).toMatch(/^[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}$/);
    // ≥ 256 random bits behind the prefix: 43 base64url characters.
    expect(body.device_code).toMatch(/^da_dc_[A-Za-z0-9_-]{43}$/);
    expect(body.verification_uri).toBe('http://localhost:3000/activate');
    expect(body.verification_uri_complete).toBe(`http://localhost:3000/activate?user_code=${body.user_code}`);
    expect(body.expires_in).toBe(600);
    expect(body.interval).toBe(5);
    expect(body.confirmation_phrase).toMatch(/^[A-Z][a-z]{2,7}[A-Z][a-z]{2,7}$/);
  });

  it('sends bot apps to /activate/bot', async () => {
    const body = await startDeviceFlow(t, bot.clientId, {}, { authorization: basicAuth(bot.clientId, bot.clientSecret!) });
    expect(body.verification_uri).toBe('http://localhost:3000/activate/bot');
    expect(body.verification_uri_complete).toBe(`http://localhost:3000/activate/bot?user_code=${body.user_code}`);
  });

  it('stores the device code only as a hash and the user code only as an HMAC', async () => {
    const body = await startDeviceFlow(t, tv.clientId);
    const rows = await t.deps.db.selectFrom('device_requests').selectAll().execute();
    const dump = JSON.stringify(rows, (_k, v) => (v instanceof Uint8Array ? Buffer.from(v).toString('hex') : v));
    expect(dump).not.toContain(body.device_code);
    expect(dump).not.toContain(body.user_code);
    expect(dump).not.toContain(body.user_code.replace('-', ''));
  });

  it('issues distinct codes and phrases', async () => {
    const seen = new Set<string>();
    for (let i = 0; i < 20; i++) {
      const body = await startDeviceFlow(t, tv.clientId);
      seen.add(body.user_code);
    }
    expect(seen.size).toBe(20);
  });

  it("a user code names one request while it is kept: a decided request's code is never drawn again", async () => {
    const body = await startDeviceFlow(t, tv.clientId);
    await decide(t, body.user_code, user.userId, 'deny');
    const hmac = userCodeHmac(t.deps.secrets.userCodeKey, body.user_code);
    const now = t.clock.now();
    const again = await insertDeviceRequest(t.deps.db, {
      device_code_hash: hashOpaque('da_dc_another-device'),
      user_code_hmac: hmac,
      client_id: tv.clientId,
      scopes: ['profile'],
      platform_name: null,
      platform_description: null,
      platform_icon: null,
      phrase: 'AmberFalcon',
      phrase_choices: ['AmberFalcon', 'QuietHarbor', 'BraveOtter'],
      interval_seconds: 5,
      created_at: now,
      expires_at: new Date(now.getTime() + 600_000),
      requester_ip: '127.0.0.1',
      requester_user_agent: null,
      dpop_jkt: null,
    });
    expect(again).toBeUndefined();
    // Typed again from the TV's old screen, the code still finds the denied request, not a new one.
    expect(await findDeviceRequestByUserCode(t.deps.db, hmac)).toMatchObject({ status: 'denied' });
  });

  it.each([
    ['an unknown client_id', () => ({ client_id: 'tv_nobody' }), {}],
    ['no client at all', () => ({}), {}],
    ['a confidential client without its secret', () => ({ client_id: bot.clientId }), {}],
    ['a confidential client with a wrong secret', () => ({}), { authorization: basicAuth('x', 'y') }],
  ])('refuses %s with 401 invalid_client', async (_name, fields, headers) => {
    const res = await requestDeviceCode(t, fields(), headers as Record<string, string>);
    expect(res.statusCode).toBe(401);
    expect(res.json().error).toBe('invalid_client');
    expect(res.headers['www-authenticate']).toMatch(/^Basic/);
  });

  it('refuses a disabled app with 401 invalid_client', async () => {
    const off = await seedClient(t);
    await setClientDisabledAt(t.deps.db, off.clientId, t.clock.now());
    const res = await requestDeviceCode(t, { client_id: off.clientId });
    expect(res.statusCode).toBe(401);
    expect(res.json()).toMatchObject({ error: 'invalid_client' });
  });

  it('refuses a scope outside the client allowed scopes with invalid_scope', async () => {
    const res = await requestDeviceCode(t, { client_id: web.clientId, scope: 'openid email' });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ error: 'invalid_scope' });
    expect(res.json().error_description).toContain('email');
  });

  it('RFC 6749 §3.1: a repeated parameter is invalid_request', async () => {
    const res = await requestDeviceCode(t, { client_id: tv.clientId, scope: ['openid', 'profile'] });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ error: 'invalid_request' });
    expect(res.json().error_description).toContain('scope');
  });

  it('RFC 8628 §3.1: takes client_secret_post as the token endpoint does; a wrong secret in the body is 401 invalid_client', async () => {
    const res = await requestDeviceCode(t, { client_id: bot.clientId, client_secret: bot.clientSecret! });
    expect(res.statusCode, res.body).toBe(200);
    const wrong = await requestDeviceCode(t, { client_id: bot.clientId, client_secret: 'dacs_wrong' });
    expect(wrong.statusCode).toBe(401);
    expect(wrong.json()).toMatchObject({ error: 'invalid_client' });
  });
});

describe('POST /oauth/token with the device grant (RFC 8628 §3.4, §3.5)', () => {
  it('pending: authorization_pending while the user has not finished, with no-store', async () => {
    const { device_code } = await startDeviceFlow(t, tv.clientId);
    wait(5);
    const res = await poll(t, tv.clientId, device_code);
    expect(res.statusCode).toBe(400);
    expect(res.headers['cache-control']).toBe('no-store');
    expect(res.json()).toMatchObject({ error: 'authorization_pending', error_description: expect.any(String) });
  });

  it('slow_down: a poll sooner than the interval grows it by 5 s, and the new interval is enforced', async () => {
    const { device_code } = await startDeviceFlow(t, tv.clientId);
    wait(5);
    expect((await poll(t, tv.clientId, device_code)).json().error).toBe('authorization_pending');
    wait(2);
    expect((await poll(t, tv.clientId, device_code)).json().error).toBe('slow_down'); // interval now 10
    wait(8.9); // sooner than 10 s less its tolerance (1 s)
    expect((await poll(t, tv.clientId, device_code)).json().error).toBe('slow_down'); // interval now 15
    wait(15);
    expect((await poll(t, tv.clientId, device_code)).json().error).toBe('authorization_pending');
    wait(15);
    expect((await poll(t, tv.clientId, device_code)).json().error).toBe('authorization_pending');
  });

  it('a first poll sooner than one interval after issue is throttled; one made at one interval is not', async () => {
    const early = await startDeviceFlow(t, tv.clientId);
    wait(1);
    expect((await poll(t, tv.clientId, early.device_code)).json().error).toBe('slow_down');
    const onTime = await startDeviceFlow(t, tv.clientId);
    wait(5);
    expect((await poll(t, tv.clientId, onTime.device_code)).json().error).toBe('authorization_pending');
  });

  it('polls racing at one moment: one is on time, every other is slow_down, and each grows the interval once', async () => {
    const { device_code, interval } = await startDeviceFlow(t, tv.clientId);
    wait(interval);
    const results = await Promise.all(Array.from({ length: 4 }, () => poll(t, tv.clientId, device_code)));
    expect(results.map((r) => r.json().error).sort()).toEqual(['authorization_pending', 'slow_down', 'slow_down', 'slow_down']);
    const row = await t.deps.db
      .selectFrom('device_requests')
      .select('interval_seconds')
      .where('device_code_hash', '=', hashOpaque(device_code))
      .executeTakeFirstOrThrow();
    expect(row.interval_seconds).toBe(interval + 3 * 5);
  });

  it('a client that waits its interval between polls is never refused', async () => {
    const { device_code, interval } = await startDeviceFlow(t, tv.clientId);
    for (let i = 0; i < 10; i++) {
      wait(interval);
      expect((await poll(t, tv.clientId, device_code)).json().error).toBe('authorization_pending');
    }
  });

  it('approved: the next poll returns the tokens once; later polls get invalid_grant', async () => {
    const flow = await startDeviceFlow(t, tv.clientId, { scope: 'openid profile email offline_access' });
    expect(await decide(t, flow.user_code, user.userId, 'approve')).toBe('approved');
    wait(5);
    const res = await poll(t, tv.clientId, flow.device_code);
    expect(res.statusCode).toBe(200);
    expect(res.headers['cache-control']).toBe('no-store');
    const tokens = res.json();
    expect(tokens).toMatchObject({ token_type: 'Bearer', expires_in: 3600, scope: 'openid profile email offline_access' });
    expect(tokens.access_token).toMatch(/^da_at_[A-Za-z0-9_-]{43}$/);
    expect(tokens.refresh_token).toMatch(/^da_rt_[A-Za-z0-9_-]{43}$/);
    expect(typeof tokens.id_token).toBe('string');
    wait(5);
    const again = await poll(t, tv.clientId, flow.device_code);
    expect(again.statusCode).toBe(400);
    expect(again.json().error).toBe('invalid_grant');
  });

  it('exactly once: of many polls racing after approval, one gets the tokens', async () => {
    const flow = await startDeviceFlow(t, tv.clientId);
    await decide(t, flow.user_code, user.userId, 'approve');
    wait(5);
    const results = await Promise.all(Array.from({ length: 12 }, () => poll(t, tv.clientId, flow.device_code)));
    const winners = results.filter((r) => r.statusCode === 200);
    expect(winners).toHaveLength(1);
    for (const loser of results.filter((r) => r.statusCode !== 200)) expect(loser.json().error).toBe('invalid_grant');
    const grants = await t.deps.db.selectFrom('device_requests').select('grant_id').where('grant_id', 'is not', null).execute();
    const tokensOnGrants = await t.deps.db.selectFrom('refresh_tokens').select('grant_id').execute();
    expect(new Set(tokensOnGrants.map((r) => r.grant_id)).size).toBe(grants.length);
  });

  it.each([
    ['deny', 'access_denied'],
    ['wrong_phrase', 'access_denied'],
  ] as const)('after %s, polling returns %s', async (choice, error) => {
    const flow = await startDeviceFlow(t, tv.clientId);
    await decide(t, flow.user_code, user.userId, choice);
    wait(5);
    const res = await poll(t, tv.clientId, flow.device_code);
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toBe(error);
  });

  it('a wrong phrase pick cancels the request for good: approving afterwards changes nothing', async () => {
    const flow = await startDeviceFlow(t, tv.clientId);
    expect(await decide(t, flow.user_code, user.userId, 'wrong_phrase')).toBe('cancelled_wrong_phrase');
    expect(await decide(t, flow.user_code, user.userId, 'approve')).toBe('already_decided');
    wait(5);
    expect((await poll(t, tv.clientId, flow.device_code)).json().error).toBe('access_denied');
  });

  it('expired_token after DEVICE_CODE_TTL, and no approval after it', async () => {
    const flow = await startDeviceFlow(t, tv.clientId);
    wait(600);
    expect(await decide(t, flow.user_code, user.userId, 'approve')).toBe('already_decided');
    const res = await poll(t, tv.clientId, flow.device_code);
    expect(res.json().error).toBe('expired_token');
  });

  it('an approval that is not collected before expiry is expired_token', async () => {
    const flow = await startDeviceFlow(t, tv.clientId);
    await decide(t, flow.user_code, user.userId, 'approve');
    wait(601);
    expect((await poll(t, tv.clientId, flow.device_code)).json().error).toBe('expired_token');
  });

  it("invalid_grant for an unknown device_code and for another client's", async () => {
    const flow = await startDeviceFlow(t, tv.clientId);
    await decide(t, flow.user_code, user.userId, 'approve');
    const other = await seedClient(t);
    wait(5);
    const stolen = await poll(t, other.clientId, flow.device_code);
    expect(stolen.statusCode).toBe(400);
    expect(stolen.json().error).toBe('invalid_grant');
    expect((await poll(t, tv.clientId, 'da_dc_unknown')).json().error).toBe('invalid_grant');
    // The rightful client still gets its tokens.
    expect((await poll(t, tv.clientId, flow.device_code)).statusCode).toBe(200);
  });

  it('a missing device_code is invalid_request; an unknown grant_type unsupported_grant_type', async () => {
    const missing = await poll(t, tv.clientId, '');
    expect(missing.json().error).toBe('invalid_request');
    const res = await t.app.inject({
      method: 'POST',
      url: '/oauth/token',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      payload: `grant_type=password&client_id=${tv.clientId}`,
    });
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toBe('unsupported_grant_type');
  });

  it('an unknown client polling is 401 invalid_client', async () => {
    const res = await poll(t, 'tv_nobody', 'da_dc_x');
    expect(res.statusCode).toBe(401);
    expect(res.json().error).toBe('invalid_client');
  });

  it('a web app gets an access token but no refresh token', async () => {
    const flow = await startDeviceFlow(t, web.clientId, { scope: 'profile' });
    await decide(t, flow.user_code, user.userId, 'approve');
    wait(5);
    const tokens = (await poll(t, web.clientId, flow.device_code)).json();
    expect(tokens.access_token).toBeDefined();
    expect(tokens.refresh_token).toBeUndefined();
    expect(tokens.id_token).toBeUndefined();
  });

  it('a confidential bot polls with HTTP Basic and gets a refresh token', async () => {
    const auth = { authorization: basicAuth(bot.clientId, bot.clientSecret!) };
    const flow = await startDeviceFlow(t, bot.clientId, {}, auth);
    await decide(t, flow.user_code, user.userId, 'approve');
    wait(5);
    const res = await poll(t, undefined, flow.device_code, auth);
    expect(res.statusCode).toBe(200);
    expect(res.json().refresh_token).toMatch(/^da_rt_/);
  });

  it('stores issued tokens only as hashes', async () => {
    const flow = await startDeviceFlow(t, tv.clientId);
    await decide(t, flow.user_code, user.userId, 'approve');
    wait(5);
    const tokens = (await poll(t, tv.clientId, flow.device_code)).json();
    for (const table of ['access_tokens', 'refresh_tokens'] as const) {
      const rows = await t.deps.db.selectFrom(table).selectAll().execute();
      const dump = JSON.stringify(rows, (_k, v) => (v instanceof Uint8Array ? Buffer.from(v).toString('hex') : v));
      expect(dump).not.toContain(tokens.access_token);
      expect(dump).not.toContain(tokens.refresh_token);
    }
  });
});

describe('ID token and userinfo', () => {
  async function signIn(scope: string) {
    const flow = await startDeviceFlow(t, tv.clientId, { scope });
    await decide(t, flow.user_code, user.userId, 'approve');
    wait(5);
    return (await poll(t, tv.clientId, flow.device_code)).json();
  }

  it('the ID token is RS256 with kid, iss, sub, aud, iat, exp and auth_time, verifiable with the JWKS', async () => {
    const tokens = await signIn('openid profile email');
    const jwks = createLocalJWKSet((await t.app.inject({ method: 'GET', url: '/.well-known/jwks.json' })).json());
    const { payload, protectedHeader } = await jwtVerify(tokens.id_token, jwks, {
      issuer: 'http://localhost:3000',
      audience: tv.clientId,
      currentDate: t.clock.now(),
    });
    expect(protectedHeader).toMatchObject({ alg: 'RS256', kid: t.deps.keys.signingKey().kid });
    expect(payload.sub).toBe(user.userId);
    expect(payload.exp! - payload.iat!).toBe(3600);
    expect(typeof payload.auth_time).toBe('number');
    // sid: the grant, the session a Shared Signals session-revoked names (issue 32 §3).
    expect(payload.sid).toBe((await grantOf(t, tokens.access_token)).grant_id);
    expect(payload.email).toBe(user.email);
    expect(payload.name).toBe('Test User');
  });

  it('userinfo answers for a live token in the Bearer header', async () => {
    const tokens = await signIn('openid profile email');
    for (const method of ['GET', 'POST'] as const) {
      const res = await t.app.inject({ method, url: '/oauth/userinfo', headers: { authorization: `Bearer ${tokens.access_token}` } });
      expect(res.statusCode).toBe(200);
      expect(res.json()).toMatchObject({ sub: user.userId, email: user.email, name: 'Test User' });
    }
  });

  it('userinfo refuses a token in the query or the body with invalid_request', async () => {
    const tokens = await signIn('openid');
    const inQuery = await t.app.inject({ method: 'GET', url: `/oauth/userinfo?access_token=${tokens.access_token}` });
    expect(inQuery.statusCode).toBe(400);
    expect(inQuery.json().error).toBe('invalid_request');
    const inBody = await t.app.inject({
      method: 'POST',
      url: '/oauth/userinfo',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      payload: `access_token=${tokens.access_token}`,
    });
    expect(inBody.statusCode).toBe(400);
    expect(inBody.json().error).toBe('invalid_request');
  });

  it('userinfo answers 401 with WWW-Authenticate: Bearer error="invalid_token" for an invalid or expired token', async () => {
    const tokens = await signIn('openid');
    const bad = await t.app.inject({ method: 'GET', url: '/oauth/userinfo', headers: { authorization: 'Bearer da_at_nope' } });
    expect(bad.statusCode).toBe(401);
    expect(bad.headers['www-authenticate']).toContain('error="invalid_token"');
    wait(3600);
    const expired = await t.app.inject({ method: 'GET', url: '/oauth/userinfo', headers: { authorization: `Bearer ${tokens.access_token}` } });
    expect(expired.statusCode).toBe(401);
    expect(expired.headers['www-authenticate']).toContain('error="invalid_token"');
  });
});
