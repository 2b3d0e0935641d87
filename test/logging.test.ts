import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basicAuth, seedClient, seedUser, startTestApp, type TestApp } from './helpers/app.js';
import { Browser, inputValue, signIn } from './helpers/browser.js';
import { poll, startDeviceFlow } from './helpers/device.js';
import { introspection, refresh, refreshed, revoke } from './helpers/tokens.js';

let t: TestApp;
const lines: string[] = [];

beforeAll(async () => {
  t = await startTestApp({ logSink: (line) => lines.push(line) });
});
afterAll(() => t.close());

describe('logs', () => {
  it('a full flow at trace level leaves no secret in the logs: codes, tokens, passwords, client secrets, cookies, Authorization', async () => {
    const user = await seedUser(t);
    const bot = await seedClient(t, { kind: 'bot', type: 'confidential' });
    const resourceServer = await seedClient(t, { kind: 'web', type: 'confidential', name: 'Photo API' });
    const basic = basicAuth(bot.clientId, bot.clientSecret!);
    const flow = await startDeviceFlow(t, bot.clientId, { scope: 'openid profile email offline_access', platform_name: 'Chat' }, { authorization: basic });

    // The user follows verification_uri_complete: the user code travels in the query string.
    const browser = new Browser(t);
    await browser.get(`/activate/bot?user_code=${flow.user_code}`);
    await browser.follow(await signIn(browser, user, `/activate/bot?user_code=${flow.user_code}`));
    const approval = await browser.post('/activate/bot', { user_code: flow.user_code });
    const decided = await browser.post('/activate/bot/decision', {
      user_code: inputValue(approval.body, 'user_code'),
      request_handle: inputValue(approval.body, 'request_handle'),
      action: 'approve',
      phrase: flow.confirmation_phrase,
    });
    expect(decided.statusCode).toBe(200);

    t.clock.advance(5);
    const tokens = (await poll(t, undefined, flow.device_code, { authorization: basic })).json();
    expect(tokens.access_token).toBeDefined();
    const userinfo = await t.app.inject({ method: 'GET', url: '/oauth/userinfo', headers: { authorization: `Bearer ${tokens.access_token}` } });
    expect(userinfo.statusCode).toBe(200);
    // Refresh, introspection by a resource server, revocation, and a replay that revokes the grant.
    const botClient = { clientId: bot.clientId, clientSecret: bot.clientSecret };
    const rotated = await refreshed(t, botClient, tokens.refresh_token);
    await introspection(t, resourceServer, rotated.access_token);
    await refresh(t, botClient, tokens.refresh_token);
    await revoke(t, botClient, rotated.refresh_token!);
    // A refused token in a URL must not be logged either.
    await t.app.inject({ method: 'GET', url: `/oauth/userinfo?access_token=${tokens.access_token}` });

    const secrets = {
      device_code: flow.device_code,
      user_code: flow.user_code,
      user_code_bare: flow.user_code.replace('-', ''),
      access_token: tokens.access_token,
      refresh_token: tokens.refresh_token,
      rotated_access_token: rotated.access_token,
      rotated_refresh_token: rotated.refresh_token!,
      id_token: tokens.id_token,
      password: user.password,
      client_secret: bot.clientSecret!,
      resource_server_secret: resourceServer.clientSecret!,
      basic_header: basic.slice('Basic '.length),
      session_cookie: [...browser.cookies.values()][0]!,
      csrf_token: browser.csrfToken!,
    };
    const log = lines.join('\n');
    expect(lines.length).toBeGreaterThan(10);
    // The requests were logged, just without their secrets.
    expect(log).toContain('"path":"/activate/bot"');
    expect(log).toContain('"path":"/oauth/token"');
    for (const [name, secret] of Object.entries(secrets)) {
      expect(secret, name).toBeTruthy();
      expect(log.includes(secret), `${name} appears in the logs`).toBe(false);
    }
  });
});
