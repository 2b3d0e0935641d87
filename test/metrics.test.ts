import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildAdminApp } from '../src/admin-app.js';
import { FORM, form, seedClient, seedUser, startTestApp, type TestApp } from './helpers/app.js';
import { Browser, inputValue, signIn } from './helpers/browser.js';
import { poll, startDeviceFlow } from './helpers/device.js';
import { postAs, refresh, revoke, rotatedGrant, signIn as signInDevice } from './helpers/tokens.js';
import { dpopKey, proofFor } from './helpers/dpop.js';
import { epochSeconds } from '../src/lib/clock.js';

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

  it('exports the revocation counter as device_auth_grant_revocations_total and, deprecated for one release, under its old chain name with the same counts', async () => {
    const user = await seedUser(t);
    const { clientId } = await seedClient(t);
    const tokens = await signInDevice(t, { clientId, clientSecret: null }, user.userId);
    const before = await scrape();
    expect((await revoke(t, { clientId, clientSecret: null }, tokens.access_token)).statusCode).toBe(200);
    const after = await scrape();

    const revokedByApp = (text: string, name: string) => sample(text, `${name}{reason="revoked_by_app"}`);
    expect(revokedByApp(after, 'device_auth_grant_revocations_total') - revokedByApp(before, 'device_auth_grant_revocations_total')).toBe(1);
    expect(revokedByApp(after, 'device_auth_chain_revocations_total') - revokedByApp(before, 'device_auth_chain_revocations_total')).toBe(1);
    // Every series of the new name has its twin under the old one, with the same value.
    const series = (text: string, name: string) =>
      text
        .split('\n')
        .filter((line) => line.startsWith(`${name}{`))
        .map((line) => line.slice(name.length))
        .sort();
    expect(series(after, 'device_auth_grant_revocations_total').length).toBeGreaterThan(0);
    expect(series(after, 'device_auth_chain_revocations_total')).toEqual(series(after, 'device_auth_grant_revocations_total'));
    expect(after).toMatch(/^# HELP device_auth_chain_revocations_total Deprecated, removed in the next release/m);
  });

  it('counts each grant a ban ended as a revocation with reason user_banned, under both names', async () => {
    const user = await seedUser(t);
    const { clientId } = await seedClient(t);
    await signInDevice(t, { clientId, clientSecret: null }, user.userId);
    await signInDevice(t, { clientId, clientSecret: null }, user.userId);
    const admin = await buildAdminApp(t.deps, { listener: 'socket', logger: false });
    try {
      const banned = (grantName: string, text: string) => sample(text, `${grantName}{reason="user_banned"}`);
      const before = await scrape();
      const ban = await admin.inject({ method: 'POST', url: `/admin/users/${encodeURIComponent(user.email)}/ban` });
      expect(ban.statusCode).toBe(200);
      expect(ban.json()).toMatchObject({ revoked_grants: 2 });
      const after = await scrape();
      expect(banned('device_auth_grant_revocations_total', after) - banned('device_auth_grant_revocations_total', before)).toBe(2);
      expect(banned('device_auth_chain_revocations_total', after) - banned('device_auth_chain_revocations_total', before)).toBe(2);

      // A second ban ends nothing more, and a ban of nobody counts nothing.
      expect((await admin.inject({ method: 'POST', url: `/admin/users/${encodeURIComponent(user.email)}/ban` })).json()).toMatchObject({ revoked_grants: 0 });
      expect((await admin.inject({ method: 'POST', url: '/admin/users/nobody%40example.test/ban' })).statusCode).toBe(404);
      expect(banned('device_auth_grant_revocations_total', await scrape())).toBe(banned('device_auth_grant_revocations_total', after));
    } finally {
      await admin.close();
    }
  });

  it('counts revocation and introspection requests that reach the work by outcome; those refused before it (no token, an unauthenticated app) count nowhere', async () => {
    const user = await seedUser(t);
    const tv = await seedClient(t);
    const rs = await seedClient(t, { kind: 'web', type: 'confidential', name: 'Metered API', introspection: true });
    const live = await signInDevice(t, tv, user.userId);
    const counts = (text: string) => ({
      revocation: ['answered', 'invalid_dpop_proof'].map((outcome) => sample(text, `device_auth_revocation_requests_total{outcome="${outcome}"}`)),
      introspection: ['active', 'inactive'].map((outcome) => sample(text, `device_auth_introspection_requests_total{outcome="${outcome}"}`)),
    });
    const before = counts(await scrape());

    expect((await postAs(t, rs, '/oauth/introspect', { token: live.access_token })).json().active).toBe(true);
    expect((await postAs(t, rs, '/oauth/introspect', { token: 'da_at_unknown' })).json().active).toBe(false);
    expect((await postAs(t, rs, '/oauth/introspect', {})).statusCode).toBe(400);
    expect((await postAs(t, { clientId: rs.clientId, clientSecret: 'dacs_wrong' }, '/oauth/introspect', { token: live.access_token })).statusCode).toBe(401);
    expect((await revoke(t, tv, 'da_rt_unknown')).statusCode).toBe(200);
    expect((await revoke(t, tv, live.access_token)).statusCode).toBe(200);
    const proof = await proofFor(await dpopKey(), { iat: epochSeconds(t.clock.now()), htu: '/oauth/token' });
    const wrongProof = await t.app.inject({
      method: 'POST',
      url: '/oauth/revoke',
      headers: { ...FORM, dpop: proof },
      payload: form({ client_id: tv.clientId, token: 'da_rt_unknown' }),
    });
    expect(wrongProof.json().error).toBe('invalid_dpop_proof');
    expect((await postAs(t, { clientId: 'no-such-app', clientSecret: null }, '/oauth/revoke', { token: 'da_rt_unknown' })).statusCode).toBe(401);

    const after = counts(await scrape());
    expect(after.revocation.map((n, i) => n - before.revocation[i]!)).toEqual([2, 1]);
    expect(after.introspection.map((n, i) => n - before.introspection[i]!)).toEqual([1, 1]);
  });
});
