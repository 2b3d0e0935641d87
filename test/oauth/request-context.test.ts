import { afterEach, describe, expect, it } from 'vitest';
import { seedClient, seedUser, startTestApp, FORM, form, type TestApp } from '../helpers/app.js';
import { decide, DEVICE_GRANT } from '../helpers/device.js';
import { USER_AGENT_MAX } from '../../src/oauth/device/authorization.js';
import { hashOpaque } from '../../src/oauth/opaque-tokens.js';

/**
 * Issue 20 §1: a device request remembers where it came from (address through TRUST_PROXY, user
 * agent, time) as long as the request is kept; its grant keeps the address of sign-in and of last
 * use. None of it reaches the log beyond what was logged before.
 */

let t: TestApp;
afterEach(() => t?.close());

async function requestFrom(headers: Record<string, string>, clientId: string) {
  const res = await t.app.inject({
    method: 'POST',
    url: '/oauth/device/code',
    headers: { ...FORM, ...headers },
    payload: form({ client_id: clientId, scope: 'openid offline_access' }),
  });
  expect(res.statusCode, res.body).toBe(200);
  return res.json() as { device_code: string; user_code: string; interval: number };
}

async function storedRequest(deviceCode: string) {
  return t.deps.db.selectFrom('device_requests').selectAll().where('device_code_hash', '=', hashOpaque(deviceCode)).executeTakeFirstOrThrow();
}

describe('where a device request came from', () => {
  it('stores the forwarded address from a trusted proxy, the user agent and the time; the grant keeps sign-in and last-use addresses', async () => {
    const lines: string[] = [];
    t = await startTestApp({ env: { TRUST_PROXY: '127.0.0.1' }, logSink: (line) => lines.push(line) });
    const tv = await seedClient(t, { kind: 'tv' });
    const user = await seedUser(t);
    const agent = 'LivingRoomOS/7.1 (SmartTV; ACME-X55)';
    const flow = await requestFrom({ 'x-forwarded-for': '203.0.113.7', 'user-agent': agent }, tv.clientId);
    const row = await storedRequest(flow.device_code);
    expect(row).toMatchObject({ requester_ip: '203.0.113.7', requester_user_agent: agent, created_at: t.clock.now() });

    expect(await decide(t, flow.user_code, user.userId, 'approve')).toBe('approved');
    t.clock.advance(flow.interval);
    const poll = await t.app.inject({
      method: 'POST',
      url: '/oauth/token',
      headers: { ...FORM, 'x-forwarded-for': '203.0.113.8' },
      payload: form({ grant_type: DEVICE_GRANT, device_code: flow.device_code, client_id: tv.clientId }),
    });
    expect(poll.statusCode, poll.body).toBe(200);
    const grantOf = () => t.deps.db.selectFrom('grants').select(['signed_in_ip', 'last_used_ip']).where('user_id', '=', user.userId).executeTakeFirstOrThrow();
    expect(await grantOf()).toEqual({ signed_in_ip: '203.0.113.7', last_used_ip: '203.0.113.8' });

    const refreshed = await t.app.inject({
      method: 'POST',
      url: '/oauth/token',
      headers: { ...FORM, 'x-forwarded-for': '198.51.100.20' },
      payload: form({ grant_type: 'refresh_token', refresh_token: poll.json().refresh_token, client_id: tv.clientId }),
    });
    expect(refreshed.statusCode, refreshed.body).toBe(200);
    expect(await grantOf()).toEqual({ signed_in_ip: '203.0.113.7', last_used_ip: '198.51.100.20' });

    // The user agent was never logged, at trace level either.
    expect(lines.length).toBeGreaterThan(0);
    expect(lines.join('\n')).not.toContain('LivingRoomOS');
  });

  it('without TRUST_PROXY a forwarded address is not believed', async () => {
    t = await startTestApp();
    const tv = await seedClient(t, { kind: 'tv' });
    const flow = await requestFrom({ 'x-forwarded-for': '203.0.113.7' }, tv.clientId);
    expect((await storedRequest(flow.device_code)).requester_ip).toBe('127.0.0.1');
  });

  it('a user agent is stored without control characters and bounded; none is null', async () => {
    t = await startTestApp();
    const tv = await seedClient(t, { kind: 'tv' });
    const long = await requestFrom({ 'user-agent': `A\tB\u007f${'x'.repeat(5000)}` }, tv.clientId);
    const stored = (await storedRequest(long.device_code)).requester_user_agent!;
    expect(stored.startsWith('AB')).toBe(true);
    expect(stored).toHaveLength(USER_AGENT_MAX);
    const latin1 = await requestFrom({ 'user-agent': 'Caf\u00e9TV \u00ff' }, tv.clientId);
    expect((await storedRequest(latin1.device_code)).requester_user_agent).toBe('Caf\u00e9TV \u00ff');
    const none = await requestFrom({ 'user-agent': '' }, tv.clientId);
    expect((await storedRequest(none.device_code)).requester_user_agent).toBeNull();
  });
});
