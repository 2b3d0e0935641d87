import { afterEach, describe, expect, it } from 'vitest';
import { afterAnnounced, basicAuth, FORM, form, seedClient, seedUser, startTestApp, type TestApp } from '../helpers/app.js';
import { decide, DEVICE_GRANT, startDeviceFlow } from '../helpers/device.js';

/**
 * Issue 21 §1: what an app may do comes from its registration (RFC 7591 §2 grant_types,
 * redirect_uris), not from its kind. A grant type the registration does not name is
 * unauthorized_client on every path to it; refresh tokens go to apps registered for the
 * refresh_token grant.
 */

let t: TestApp;
afterEach(() => t?.close());

const REFRESH = 'refresh_token';

const token = (fields: Record<string, string>, headers: Record<string, string> = {}) =>
  t.app.inject({ method: 'POST', url: '/oauth/token', headers: { ...FORM, ...headers }, payload: form(fields) });

async function approvedTokens(clientId: string) {
  const user = await seedUser(t);
  const started = await startDeviceFlow(t, clientId);
  expect(await decide(t, started.user_code, user.userId, 'approve')).toBe('approved');
  t.clock.advance(5);
  const res = await token({ grant_type: DEVICE_GRANT, device_code: started.device_code, client_id: clientId });
  expect(res.statusCode, res.body).toBe(200);
  return res.json() as { access_token: string; refresh_token?: string };
}

describe('grant types come from the registration', () => {
  it('every kind keeps what it could do by default: tv and bot get refresh tokens, web does not', async () => {
    t = await startTestApp();
    const tv = await seedClient(t, { kind: 'tv' });
    const web = await seedClient(t, { kind: 'web', type: 'public', name: 'Web' });
    expect((await approvedTokens(tv.clientId)).refresh_token).toMatch(/^da_rt_/);
    expect((await approvedTokens(web.clientId)).refresh_token).toBeUndefined();
  });

  it('a web app registered for refresh_token gets and rotates refresh tokens; a TV registered without it gets none', async () => {
    t = await startTestApp();
    const web = await seedClient(t, { kind: 'web', type: 'public', name: 'Web', grantTypes: [DEVICE_GRANT, REFRESH] });
    const tv = await seedClient(t, { kind: 'tv', grantTypes: [DEVICE_GRANT] });
    const webTokens = await approvedTokens(web.clientId);
    expect(webTokens.refresh_token).toMatch(/^da_rt_/);
    const rotated = await token({ grant_type: REFRESH, refresh_token: webTokens.refresh_token!, client_id: web.clientId });
    expect(rotated.statusCode, rotated.body).toBe(200);
    expect(rotated.json().refresh_token).not.toBe(webTokens.refresh_token);
    expect((await approvedTokens(tv.clientId)).refresh_token).toBeUndefined();
  });

  it('an app not registered for the device grant gets unauthorized_client at the device endpoint and at the token endpoint', async () => {
    t = await startTestApp();
    const refreshOnly = await seedClient(t, { kind: 'tv', grantTypes: [REFRESH] });
    const code = await t.app.inject({ method: 'POST', url: '/oauth/device/code', headers: FORM, payload: form({ client_id: refreshOnly.clientId }) });
    expect(code.statusCode).toBe(400);
    expect(code.json().error).toBe('unauthorized_client');
    const poll = await token({ grant_type: DEVICE_GRANT, device_code: 'da_dc_whatever', client_id: refreshOnly.clientId });
    expect(poll.statusCode).toBe(400);
    expect(poll.json().error).toBe('unauthorized_client');
    const rows = await t.deps.db.selectFrom('device_requests').select('request_id').where('client_id', '=', refreshOnly.clientId).execute();
    expect(rows).toEqual([]);
  });

  it("a grant type taken away stops at the next request: the app's live refresh token gets unauthorized_client", async () => {
    t = await startTestApp();
    const bot = await seedClient(t, { kind: 'bot', type: 'confidential', name: 'Bot' });
    const headers = { authorization: basicAuth(bot.clientId, bot.clientSecret!) };
    const user = await seedUser(t);
    const started = await startDeviceFlow(t, bot.clientId, {}, headers);
    expect(await decide(t, started.user_code, user.userId, 'approve')).toBe('approved');
    t.clock.advance(5);
    const issued = await token({ grant_type: DEVICE_GRANT, device_code: started.device_code }, headers);
    expect(issued.statusCode, issued.body).toBe(200);

    const { changeClient } = await import('../../src/apps/registration.js');
    const changed = await afterAnnounced(t, () => changeClient(t.deps.db, bot.clientId, { grant_types: [DEVICE_GRANT] }));
    expect(changed.kind).toBe('changed');
    const refused = await token({ grant_type: REFRESH, refresh_token: issued.json().refresh_token }, headers);
    expect(refused.statusCode).toBe(400);
    expect(refused.json().error).toBe('unauthorized_client');
  });

  it('an unknown grant_type stays unsupported_grant_type, whatever the registration', async () => {
    t = await startTestApp();
    const tv = await seedClient(t, { kind: 'tv' });
    const res = await token({ grant_type: 'password', client_id: tv.clientId, username: 'a', password: 'b' });
    expect(res.json().error).toBe('unsupported_grant_type');
  });

  it('authorization_code is registered with at least one redirect URI; without one it is refused, on create and on change', async () => {
    t = await startTestApp();
    const { createClient, changeClient } = await import('../../src/apps/registration.js');
    const created = await createClient(t.deps.db, {
      name: 'Photo Board',
      kind: 'web',
      type: 'public',
      scopes: ['openid'],
      grant_types: ['authorization_code'],
      redirect_uris: ['https://photos.example/callback', 'http://127.0.0.1:8080/cb'],
    });
    expect(created.grant_types).toEqual(['authorization_code']);
    await expect(
      createClient(t.deps.db, { name: 'No Way Back', kind: 'web', type: 'public', scopes: ['openid'], grant_types: ['authorization_code'] }),
    ).rejects.toThrow(/redirect URI/);
    expect(await changeClient(t.deps.db, created.client_id, { redirect_uris: [] })).toMatchObject({ kind: 'refused' });
    const device = await seedClient(t, { kind: 'web' });
    expect(await changeClient(t.deps.db, device.clientId, { grant_types: ['authorization_code'] })).toMatchObject({ kind: 'refused' });
    expect(
      await changeClient(t.deps.db, device.clientId, { grant_types: ['authorization_code'], redirect_uris: ['https://photos.example/callback'] }),
    ).toMatchObject({
      kind: 'changed',
    });
  });
});
