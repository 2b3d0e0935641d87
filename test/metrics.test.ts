import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { seedClient, seedUser, startTestApp, type TestApp } from './helpers/app.js';
import { Browser, inputValue, signIn } from './helpers/browser.js';
import { poll, startDeviceFlow } from './helpers/device.js';
import { refresh, revoke, rotatedGrant, signIn as signInDevice } from './helpers/tokens.js';

const METRICS_TOKEN = 'metrics-scraper-secret-0123456789';
let t: TestApp;

beforeAll(async () => {
  t = await startTestApp({ env: { METRICS_TOKEN } });
});
afterAll(() => t.close());

async function scrape(): Promise<string> {
  const res = await t.app.inject({ method: 'GET', url: '/metrics', headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
  expect(res.statusCode).toBe(200);
  expect(res.headers['content-type']).toContain('text/plain');
  return res.body;
}

/** The value of one sample line, e.g. metric{label="x"} 3 -> 3; 0 when absent. */
function sample(text: string, series: string): number {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line ? Number(line.slice(series.length + 1)) : 0;
}

describe('GET /metrics (Prometheus)', () => {
  it('is closed without the bearer secret, and absent when METRICS_TOKEN is unset', async () => {
    expect((await t.app.inject({ method: 'GET', url: '/metrics' })).statusCode).toBe(401);
    expect((await t.app.inject({ method: 'GET', url: '/metrics', headers: { authorization: 'Bearer wrong-secret-but-long-enough' } })).statusCode).toBe(401);
    const open = await startTestApp();
    try {
      expect((await open.app.inject({ method: 'GET', url: '/metrics' })).statusCode).toBe(404);
    } finally {
      await open.close();
    }
  });

  it('counts device codes, polls by outcome, decisions, tokens issued, and request durations by route and status', async () => {
    const user = await seedUser(t);
    const { clientId } = await seedClient(t);
    const browser = new Browser(t);
    await browser.follow(await signIn(browser, user));

    const decideInBrowser = async (userCode: string, action: 'approve' | 'deny', phrase?: string) => {
      const approval = await browser.post('/activate', { user_code: userCode });
      return browser.post('/activate/decision', {
        user_code: inputValue(approval.body, 'user_code'),
        request_handle: inputValue(approval.body, 'request_handle'),
        action,
        phrase,
      });
    };

    const approved = await startDeviceFlow(t, clientId);
    const denied = await startDeviceFlow(t, clientId);
    const cancelled = await startDeviceFlow(t, clientId);
    expect((await poll(t, clientId, approved.device_code)).json().error).toBe('slow_down');
    t.clock.advance(10);
    expect((await poll(t, clientId, approved.device_code)).json().error).toBe('authorization_pending');
    await decideInBrowser(approved.user_code, 'approve', approved.confirmation_phrase);
    await decideInBrowser(denied.user_code, 'deny');
    await decideInBrowser(cancelled.user_code, 'approve', 'NotThePhrase');
    t.clock.advance(10);
    expect((await poll(t, clientId, approved.device_code)).statusCode).toBe(200);
    expect((await poll(t, clientId, denied.device_code)).json().error).toBe('access_denied');

    const text = await scrape();
    const grant = 'grant_type="urn:ietf:params:oauth:grant-type:device_code"';
    expect(sample(text, 'device_auth_device_codes_issued_total{client_kind="tv"}')).toBe(3);
    expect(sample(text, `device_auth_token_requests_total{${grant},outcome="slow_down"}`)).toBe(1);
    expect(sample(text, `device_auth_token_requests_total{${grant},outcome="authorization_pending"}`)).toBe(1);
    expect(sample(text, `device_auth_token_requests_total{${grant},outcome="issued"}`)).toBe(1);
    expect(sample(text, `device_auth_token_requests_total{${grant},outcome="access_denied"}`)).toBe(1);
    expect(sample(text, 'device_auth_verification_decisions_total{decision="approved"}')).toBe(1);
    expect(sample(text, 'device_auth_verification_decisions_total{decision="denied"}')).toBe(1);
    expect(sample(text, 'device_auth_verification_decisions_total{decision="cancelled_wrong_phrase"}')).toBe(1);
    expect(sample(text, 'device_auth_http_request_duration_seconds_count{method="POST",route="/oauth/device/code",status="200"}')).toBe(3);
    expect(sample(text, 'device_auth_http_request_duration_seconds_count{method="POST",route="/oauth/token",status="400"}')).toBe(3);
    expect(text).toContain('device_auth_process_');

    // Refresh rotations, reuse detections and revocations.
    const rotated = await rotatedGrant(t, { clientId, clientSecret: null }, user.userId);
    t.clock.advance(t.config.refreshRetryWindow + 1);
    expect((await refresh(t, { clientId, clientSecret: null }, rotated.first.refresh_token!)).json().error).toBe('invalid_grant');
    const other = await signInDevice(t, { clientId, clientSecret: null }, user.userId);
    expect((await revoke(t, { clientId, clientSecret: null }, other.access_token)).statusCode).toBe(200);
    const after = await scrape();
    expect(sample(after, 'device_auth_token_requests_total{grant_type="refresh_token",outcome="issued"}')).toBe(1);
    expect(sample(after, 'device_auth_token_requests_total{grant_type="refresh_token",outcome="invalid_grant"}')).toBe(1);
    expect(sample(after, 'device_auth_chain_revocations_total{reason="reuse_detected"}')).toBe(1);
    expect(sample(after, 'device_auth_chain_revocations_total{reason="revoked_by_app"}')).toBe(1);
    // Pool use exists where there is a pool: on PostgreSQL.
    expect(text.includes('device_auth_db_pool_connections{state="in_use"}')).toBe(t.database.url !== null);
  });
});
