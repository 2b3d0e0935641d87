import { expect } from 'vitest';
import { hashOpaque } from '../../src/oauth/opaque-tokens.js';
import { basicAuth, FORM, form, seedClient, seedUser, startTestApp, type TestApp } from './app.js';
import { decide, poll, startDeviceFlow } from './device.js';

export interface TestClient {
  clientId: string;
  clientSecret: string | null;
}

export const ALL_SCOPES = 'openid profile email offline_access';

/** An app with one client of each kind, a resource server that introspects, and a user. */
export async function startWithClients() {
  const t = await startTestApp();
  return {
    t,
    tv: await seedClient(t, { kind: 'tv' }),
    bot: await seedClient(t, { kind: 'bot', type: 'confidential', name: 'Helper Bot' }),
    web: await seedClient(t, { kind: 'web', scopes: ['openid', 'profile'] }),
    rs: await seedClient(t, { kind: 'web', type: 'confidential', name: 'Photo API' }),
    user: await seedUser(t),
  };
}

export interface TokenSet {
  access_token: string;
  token_type: 'Bearer';
  expires_in: number;
  scope: string;
  refresh_token?: string;
  id_token?: string;
}

/** As a client of this kind authenticates: HTTP Basic with a secret, client_id without one. */
export function authentication(client: TestClient): { fields: Record<string, string>; headers: Record<string, string> } {
  return client.clientSecret
    ? { fields: {}, headers: { authorization: basicAuth(client.clientId, client.clientSecret) } }
    : { fields: { client_id: client.clientId }, headers: {} };
}

export async function postAs(t: TestApp, client: TestClient, url: string, fields: Record<string, string | undefined>) {
  const { fields: auth, headers } = authentication(client);
  return t.app.inject({ method: 'POST', url, headers: { ...FORM, ...headers }, payload: form({ ...auth, ...fields }) });
}

/** The whole device flow for `client`, approved by `userId` without the browser pages. */
export async function signIn(
  t: TestApp,
  client: TestClient,
  userId: string,
  scope?: string,
  platform: { platform_name?: string; platform_description?: string } = {},
): Promise<TokenSet> {
  const { headers } = authentication(client);
  const flow = await startDeviceFlow(t, client.clientId, { ...platform, ...(scope === undefined ? {} : { scope }) }, headers);
  expect(await decide(t, flow.user_code, userId, 'approve')).toBe('approved');
  t.clock.advance(flow.interval);
  const res = await poll(t, client.clientId, flow.device_code, headers);
  expect(res.statusCode, res.body).toBe(200);
  return res.json();
}

/** A grant that has rotated once: first -> second. */
export interface RotatedGrant {
  first: TokenSet;
  second: TokenSet;
}

export async function rotatedGrant(t: TestApp, client: TestClient, userId: string, scope = ALL_SCOPES): Promise<RotatedGrant> {
  const first = await signIn(t, client, userId, scope);
  const second = await refreshed(t, client, first.refresh_token!);
  return { first, second };
}

export const refresh = (t: TestApp, client: TestClient, refreshToken: string, scope?: string) =>
  postAs(t, client, '/oauth/token', { grant_type: 'refresh_token', refresh_token: refreshToken, scope });

export async function refreshed(t: TestApp, client: TestClient, refreshToken: string, scope?: string): Promise<TokenSet> {
  const res = await refresh(t, client, refreshToken, scope);
  expect(res.statusCode, res.body).toBe(200);
  return res.json();
}

export const revoke = (t: TestApp, client: TestClient, token: string, hint?: string) => postAs(t, client, '/oauth/revoke', { token, token_type_hint: hint });

export async function introspection(t: TestApp, resourceServer: TestClient, token: string) {
  const res = await postAs(t, resourceServer, '/oauth/introspect', { token });
  expect(res.statusCode, res.body).toBe(200);
  return res.json();
}

export const userinfo = (t: TestApp, accessToken: string) =>
  t.app.inject({ method: 'GET', url: '/oauth/userinfo', headers: { authorization: `Bearer ${accessToken}` } });

/** The grant a refresh or access token belongs to, as stored. */
export async function grantOf(t: TestApp, token: string) {
  const hash = hashOpaque(token);
  const owner =
    (await t.deps.db.selectFrom('refresh_tokens').select('grant_id').where('token_hash', '=', hash).executeTakeFirst()) ??
    (await t.deps.db.selectFrom('access_tokens').select('grant_id').where('token_hash', '=', hash).executeTakeFirstOrThrow());
  return t.deps.db.selectFrom('grants').selectAll().where('grant_id', '=', owner.grant_id).executeTakeFirstOrThrow();
}

export async function eventsOf(t: TestApp, grantId: string) {
  return t.deps.db.selectFrom('events').select(['type', 'reason', 'client_ip']).where('grant_id', '=', grantId).orderBy('event_id').execute();
}

/** Every given token is refused everywhere: inactive, no userinfo, no refresh. */
export async function expectAllRefused(t: TestApp, resourceServer: TestClient, client: TestClient, tokens: { access: string[]; refresh: string[] }) {
  for (const token of tokens.access) {
    expect(await introspection(t, resourceServer, token)).toEqual({ active: false });
    expect((await userinfo(t, token)).statusCode).toBe(401);
  }
  for (const token of tokens.refresh) {
    const res = await refresh(t, client, token);
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toBe('invalid_grant');
  }
}
