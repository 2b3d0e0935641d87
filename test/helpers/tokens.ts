import { expect } from 'vitest';
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
function authentication(client: TestClient): { fields: Record<string, string>; headers: Record<string, string> } {
  return client.clientSecret
    ? { fields: {}, headers: { authorization: basicAuth(client.clientId, client.clientSecret) } }
    : { fields: { client_id: client.clientId }, headers: {} };
}

export async function postAs(t: TestApp, client: TestClient, url: string, fields: Record<string, string | undefined>) {
  const { fields: auth, headers } = authentication(client);
  return t.app.inject({ method: 'POST', url, headers: { ...FORM, ...headers }, payload: form({ ...auth, ...fields }) });
}

/** The whole device flow for `client`, approved by `userId` without the browser pages. */
export async function signIn(t: TestApp, client: TestClient, userId: string, scope?: string): Promise<TokenSet> {
  const { headers } = authentication(client);
  const flow = await startDeviceFlow(t, client.clientId, scope === undefined ? {} : { scope }, headers);
  expect(await decide(t, flow.user_code, userId, 'approve')).toBe('approved');
  t.clock.advance(flow.interval);
  const res = await poll(t, client.clientId, flow.device_code, headers);
  expect(res.statusCode, res.body).toBe(200);
  return res.json();
}

export async function introspection(t: TestApp, resourceServer: TestClient, token: string) {
  const res = await postAs(t, resourceServer, '/oauth/introspect', { token });
  expect(res.statusCode, res.body).toBe(200);
  return res.json();
}

export const userinfo = (t: TestApp, accessToken: string) =>
  t.app.inject({ method: 'GET', url: '/oauth/userinfo', headers: { authorization: `Bearer ${accessToken}` } });
