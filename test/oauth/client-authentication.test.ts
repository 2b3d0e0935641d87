import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FORM, basicAuth, form, seedClient, type TestApp } from '../helpers/app.js';
import { decide, DEVICE_GRANT, requestDeviceCode } from '../helpers/device.js';
import { grantOf, introspection, signIn, startWithClients, type TestClient } from '../helpers/tokens.js';

let t: TestApp;
let tv: TestClient;
let bot: TestClient;
let rs: TestClient;
let user: { userId: string };

beforeAll(async () => {
  ({ t, tv, bot, rs, user } = await startWithClients());
});
afterAll(() => t.close());

/** Basic credentials as oidc-agent sends them for a public client: its id and an empty password. */
const emptyPassword = (clientId: string) => basicAuth(clientId, '');

function post(url: string, fields: Record<string, string | undefined>, headers: Record<string, string> = {}) {
  return t.app.inject({ method: 'POST', url, headers: { ...FORM, ...headers }, payload: form(fields) });
}

function expectInvalidClient(res: Awaited<ReturnType<typeof post>>) {
  expect(res.statusCode, res.body).toBe(401);
  expect(res.json().error).toBe('invalid_client');
  expect(res.headers['www-authenticate']).toMatch(/^Basic realm=/);
}

describe('RFC 6749 §2.3.1: a public client sending HTTP Basic with its client_id and an empty password', () => {
  it('gets a device code, its tokens and a refresh exactly as with client_id in the form', async () => {
    const headers = { authorization: emptyPassword(tv.clientId) };
    const code = await post('/oauth/device/code', { scope: 'openid offline_access' }, headers);
    expect(code.statusCode, code.body).toBe(200);
    const flow = code.json();
    expect(await decide(t, flow.user_code, user.userId, 'approve')).toBe('approved');
    t.clock.advance(flow.interval);
    const tokens = await post('/oauth/token', { grant_type: DEVICE_GRANT, device_code: flow.device_code }, headers);
    expect(tokens.statusCode, tokens.body).toBe(200);
    expect(await introspection(t, rs, tokens.json().access_token)).toMatchObject({ active: true, client_id: tv.clientId });

    const refreshed = await post('/oauth/token', { grant_type: 'refresh_token', refresh_token: tokens.json().refresh_token }, headers);
    expect(refreshed.statusCode, refreshed.body).toBe(200);
    const revoked = await post('/oauth/revoke', { token: refreshed.json().refresh_token }, headers);
    expect(revoked.statusCode, revoked.body).toBe(200);
    expect((await grantOf(t, refreshed.json().refresh_token)).revoked_reason).toBe('revoked_by_app');
  });

  it('decodes the form-urlencoded client_id inside the Basic credentials (RFC 6749 §2.3.1)', async () => {
    // "_" written as %5F: the same client, once decoded.
    const encoded = tv.clientId.replace('_', '%5F');
    const authorization = `Basic ${Buffer.from(`${encoded}:`).toString('base64')}`;
    const res = await post('/oauth/device/code', {}, { authorization });
    expect(res.statusCode, res.body).toBe(200);
  });

  it('also accepts a matching client_id in the form beside it', async () => {
    const res = await post('/oauth/device/code', { client_id: tv.clientId }, { authorization: emptyPassword(tv.clientId) });
    expect(res.statusCode, res.body).toBe(200);
  });

  it('an empty client_secret in the form is no secret for a public client either', async () => {
    const res = await post('/oauth/device/code', { client_id: tv.clientId, client_secret: '' });
    expect(res.statusCode, res.body).toBe(200);
  });

  it.each([
    ['a public client with a non-empty password in HTTP Basic', () => ({}), () => ({ authorization: basicAuth(tv.clientId, 'guess') })],
    ['a public client with a secret in the form', () => ({ client_id: tv.clientId, client_secret: 'guess' }), () => ({})],
    ['a confidential client with an empty password in HTTP Basic', () => ({}), () => ({ authorization: emptyPassword(bot.clientId) })],
    ['a confidential client with an empty client_secret in the form', () => ({ client_id: bot.clientId, client_secret: '' }), () => ({})],
  ])('%s is refused with 401 invalid_client at every endpoint', async (_name, fields, headers) => {
    for (const [url, extra] of [
      ['/oauth/device/code', {}],
      ['/oauth/token', { grant_type: DEVICE_GRANT, device_code: 'da_dc_x' }],
      ['/oauth/revoke', { token: 'da_rt_x' }],
    ] as const) {
      expectInvalidClient(await post(url, { ...extra, ...fields() }, headers()));
    }
  });
});

describe('RFC 7009 §2.1 / RFC 7662 §2.1: client_secret_post at revocation and introspection', () => {
  it('discovery lists client_secret_post for both endpoints', async () => {
    const meta = (await t.app.inject({ method: 'GET', url: '/.well-known/openid-configuration' })).json();
    expect(meta.revocation_endpoint_auth_methods_supported).toEqual(['client_secret_basic', 'client_secret_post', 'none']);
    expect(meta.introspection_endpoint_auth_methods_supported).toEqual(['client_secret_basic', 'client_secret_post']);
  });

  it('a confidential client revokes with client_secret in the form: 200 and the grant is revoked', async () => {
    const tokens = await signIn(t, bot, user.userId);
    const res = await post('/oauth/revoke', { token: tokens.access_token, client_id: bot.clientId, client_secret: bot.clientSecret! });
    expect(res.statusCode, res.body).toBe(200);
    expect(await introspection(t, rs, tokens.access_token)).toEqual({ active: false });
    expect((await grantOf(t, tokens.refresh_token!)).revoked_reason).toBe('revoked_by_app');
  });

  it('a resource server introspects with client_secret in the form', async () => {
    const tokens = await signIn(t, tv, user.userId);
    const res = await post('/oauth/introspect', { token: tokens.access_token, client_id: rs.clientId, client_secret: rs.clientSecret! });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ active: true, client_id: tv.clientId });
  });

  it('the device authorization endpoint takes client_secret_post too, as the token endpoint does', async () => {
    const res = await requestDeviceCode(t, { client_id: bot.clientId, client_secret: bot.clientSecret! });
    expect(res.statusCode, res.body).toBe(200);
  });
});

describe('RFC 6749 §5.2: failed or unsupported client authentication is 401 invalid_client, never 400', () => {
  const cases: [string, () => Record<string, string>, () => Record<string, string>][] = [
    ['a public client sending a secret in the form', () => ({ client_id: tv.clientId, client_secret: 'dacs_guess' }), () => ({})],
    ['a wrong secret in the form', () => ({ client_id: bot.clientId, client_secret: 'dacs_wrong' }), () => ({})],
    ['a wrong secret in HTTP Basic', () => ({}), () => ({ authorization: basicAuth(rs.clientId, 'dacs_wrong') })],
    ['a confidential client sending only its client_id', () => ({ client_id: rs.clientId }), () => ({})],
    ['a client_secret without a client_id', () => ({ client_secret: 'dacs_wrong' }), () => ({})],
    [
      'client_secret_jwt (a client assertion), which is not supported',
      () => ({
        client_id: rs.clientId,
        client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer',
        client_assertion: 'eyJhbGciOiJIUzI1NiJ9.e30.c2ln',
      }),
      () => ({}),
    ],
    ['a client_assertion_type alone', () => ({ client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer' }), () => ({})],
    ['an Authorization scheme other than Basic', () => ({ client_id: rs.clientId }), () => ({ authorization: 'Bearer da_at_something' })],
  ];

  it.each(cases)('revocation: %s', async (_name, fields, headers) => {
    const tokens = await signIn(t, bot, user.userId);
    expectInvalidClient(await post('/oauth/revoke', { token: tokens.access_token, ...fields() }, headers()));
    // Nothing was revoked by a client that did not authenticate.
    expect((await grantOf(t, tokens.refresh_token!)).revoked_at).toBeNull();
  });

  it.each(cases)('introspection: %s', async (_name, fields, headers) => {
    const tokens = await signIn(t, tv, user.userId);
    expectInvalidClient(await post('/oauth/introspect', { token: tokens.access_token, ...fields() }, headers()));
  });

  it.each(cases)('token endpoint: %s', async (_name, fields, headers) => {
    expectInvalidClient(await post('/oauth/token', { grant_type: 'refresh_token', refresh_token: 'da_rt_x', ...fields() }, headers()));
  });
});

describe('RFC 6749 §2.3: two authentication methods in one request stay 400 invalid_request', () => {
  it.each([
    [
      'HTTP Basic and client_secret in the form',
      () => ({ client_id: bot.clientId, client_secret: bot.clientSecret! }),
      () => ({ authorization: basicAuth(bot.clientId, bot.clientSecret!) }),
    ],
    [
      'client_secret in the form and a client assertion',
      () => ({
        client_id: bot.clientId,
        client_secret: bot.clientSecret!,
        client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer',
        client_assertion: 'x.y.z',
      }),
      () => ({}),
    ],
  ])('%s', async (_name, fields, headers) => {
    for (const url of ['/oauth/revoke', '/oauth/introspect', '/oauth/device/code']) {
      const res = await post(url, { token: 'da_rt_x', ...fields() }, headers());
      expect(res.statusCode, `${url}: ${res.body}`).toBe(400);
      expect(res.json().error).toBe('invalid_request');
    }
  });

  it('a client_id in the form that differs from the one in HTTP Basic is invalid_request', async () => {
    const seeded = await seedClient(t);
    const res = await post('/oauth/revoke', { token: 'da_rt_x', client_id: seeded.clientId }, { authorization: emptyPassword(tv.clientId) });
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toBe('invalid_request');
  });
});
