import { afterEach, describe, expect, it, vi } from 'vitest';
import { seedClient, seedUser, startTestApp, type TestApp } from '../helpers/app.js';
import { approvalPage, approverAt, decideOnPage } from '../helpers/approval.js';
import { EC2_KOREA, HOME_DE, HOME_US, deviceCodeFrom, from, policyAdmin, pollFrom, refusalsMetric, type PolicyAdmin } from '../helpers/policy.js';
import { hashOpaque } from '../../src/oauth/opaque-tokens.js';
import type { DeviceAuthorizationResponse } from '../../src/oauth/device/authorization.js';

/**
 * Issue 31 §2: each device policy rule in each mode, over HTTP, with the parties' addresses in
 * X-Forwarded-For behind a loopback proxy (TRUST_PROXY) and placed by the shipped location data.
 * Report-only: the answer is the one without the rule, and the rule's counts and metric say what it
 * would have done. Enforce: the OAuth error a device can show.
 */

// Each case starts an app on a fresh database: on the embedded one, on a shared machine, that alone may take 30 s.
vi.setConfig({ testTimeout: 120_000 });

let t: TestApp;
let admin: PolicyAdmin;
afterEach(async () => {
  await admin?.close();
  await t?.close();
});

async function setUp() {
  t = await startTestApp({ env: { TRUST_PROXY: '127.0.0.1' } });
  admin = await policyAdmin(t);
  const tv = await seedClient(t, { kind: 'tv', name: 'Living Room TV' });
  const other = await seedClient(t, { kind: 'tv', name: 'Kitchen TV' });
  return { tv, other };
}

async function codeFrom(clientId: string, address: string, fields: Record<string, string> = {}): Promise<DeviceAuthorizationResponse> {
  const res = await deviceCodeFrom(t, clientId, address, fields);
  expect(res.statusCode, res.body).toBe(200);
  return res.json();
}

/** [rule, its values, an address it refuses, one it lets through (null: none), the device code endpoint's refusal]. */
const PLACE_RULES = [
  ['device-flow', {}, HOME_DE, null, [400, 'unauthorized_client']],
  ['device-countries', { countries_block: ['KR'] }, EC2_KOREA, HOME_DE, [403, 'access_denied']],
  ['device-countries', { countries_allow: ['DE'] }, HOME_US, HOME_DE, [403, 'access_denied']],
  ['device-asns', { asns_block: [16509] }, EC2_KOREA, HOME_DE, [403, 'access_denied']],
  ['device-hosting', {}, EC2_KOREA, HOME_US, [403, 'access_denied']],
] as const;

const LEVELS = [
  ['global', false],
  ['for one app', true],
] as const;

describe('place rules and the kill switch', () => {
  describe.each(LEVELS)('%s', (_level, perApp) => {
    it.each(PLACE_RULES)(
      '%s %j, report-only: every answer as before; the counts and the metric say what it would have refused',
      async (rule, values, refused, passing) => {
        const { tv } = await setUp();
        const pending = await codeFrom(tv.clientId, refused);
        await admin.rule(rule, 'report-only', { ...values, ...(perApp && { client_id: tv.clientId }) });

        expect((await deviceCodeFrom(t, tv.clientId, refused)).statusCode).toBe(200);
        t.clock.advance(pending.interval);
        expect((await pollFrom(t, tv.clientId, pending.device_code, refused)).json()).toMatchObject({ error: 'authorization_pending' });
        if (passing) expect((await deviceCodeFrom(t, tv.clientId, passing)).statusCode).toBe(200);

        const counts = await admin.counts(rule, perApp ? tv.clientId : null);
        expect(counts).toMatchObject({ mode: 'report-only', refused: 0, would_have_refused: 2 });
        expect(await refusalsMetric(t, { rule, level: perApp ? 'app' : 'global', outcome: 'would_have_refused' })).toBe(2);
        expect(await refusalsMetric(t, { rule, level: perApp ? 'app' : 'global', outcome: 'refused' })).toBe(0);
      },
    );

    it.each(PLACE_RULES)(
      '%s %j, enforce: new device codes and polls refused with an error the device can show; the rest as before',
      async (rule, values, refused, passing, [status, error]) => {
        const { tv, other } = await setUp();
        const pending = await codeFrom(tv.clientId, refused);
        const otherPending = await codeFrom(other.clientId, refused);
        await admin.rule(rule, 'enforce', { ...values, ...(perApp && { client_id: tv.clientId }) });

        const code = await deviceCodeFrom(t, tv.clientId, refused);
        expect(code.statusCode).toBe(status);
        expect(code.json()).toMatchObject({ error });
        expect(code.json().error_description).toMatch(/service/);
        t.clock.advance(pending.interval);
        const poll = await pollFrom(t, tv.clientId, pending.device_code, refused);
        expect(poll.statusCode).toBe(400);
        expect(poll.json()).toMatchObject({ error: 'access_denied' });
        expect(poll.json().error_description).toMatch(/service/);
        if (passing) {
          expect((await deviceCodeFrom(t, tv.clientId, passing)).statusCode).toBe(200);
          expect((await pollFrom(t, tv.clientId, pending.device_code, passing)).json()).toMatchObject({ error: 'authorization_pending' });
        }
        // Another app is held to a global rule only.
        expect((await deviceCodeFrom(t, other.clientId, refused)).statusCode).toBe(perApp ? 200 : status);
        expect((await pollFrom(t, other.clientId, otherPending.device_code, refused)).json()).toMatchObject({
          error: perApp ? 'authorization_pending' : 'access_denied',
        });

        const counts = await admin.counts(rule, perApp ? tv.clientId : null);
        expect(counts).toMatchObject({ mode: 'enforce', refused: perApp ? 2 : 4, would_have_refused: 0 });
        expect(await refusalsMetric(t, { rule, level: perApp ? 'app' : 'global', outcome: 'refused' })).toBe(perApp ? 2 : 4);
      },
    );
  });

  it('off: the rule is stored, judges nothing and counts nothing', async () => {
    const { tv } = await setUp();
    await admin.rule('device-hosting', 'enforce');
    await admin.rule('device-hosting', 'off');
    expect((await deviceCodeFrom(t, tv.clientId, EC2_KOREA)).statusCode).toBe(200);
    expect(await admin.counts('device-hosting', null)).toMatchObject({ mode: 'off', refused: 0, would_have_refused: 0 });
  });

  it('moving a rule from report-only to enforce changes only that it refuses; its counts start again from the change', async () => {
    const { tv } = await setUp();
    await admin.rule('device-hosting', 'report-only', { client_id: tv.clientId });
    const before = await deviceCodeFrom(t, tv.clientId, EC2_KOREA);
    const home = await deviceCodeFrom(t, tv.clientId, HOME_US);
    expect(before.statusCode).toBe(200);
    expect(Object.keys(before.json()).sort()).toEqual(Object.keys(home.json()).sort());
    expect((await admin.counts('device-hosting', tv.clientId)).would_have_refused).toBe(1);

    await admin.rule('device-hosting', 'enforce', { client_id: tv.clientId });
    expect((await deviceCodeFrom(t, tv.clientId, EC2_KOREA)).statusCode).toBe(403);
    const after = await deviceCodeFrom(t, tv.clientId, HOME_US);
    expect(after.statusCode).toBe(200);
    expect(Object.keys(after.json()).sort()).toEqual(Object.keys(home.json()).sort());
    expect(await admin.counts('device-hosting', tv.clientId)).toMatchObject({ mode: 'enforce', refused: 1, would_have_refused: 0 });
  });

  it('report-only and enforced refusals are told in one log line per rule and flush, never one per request', async () => {
    const lines: string[] = [];
    t = await startTestApp({ env: { TRUST_PROXY: '127.0.0.1' }, logSink: (line) => lines.push(line) });
    admin = await policyAdmin(t);
    const tv = await seedClient(t, { kind: 'tv' });
    await admin.rule('device-asns', 'report-only', { asns_block: [16509] });
    for (let i = 0; i < 5; i++) expect((await deviceCodeFrom(t, tv.clientId, EC2_KOREA)).statusCode).toBe(200);
    await t.deps.devicePolicies.flush();
    const told = lines.map((line) => JSON.parse(line)).filter((line) => line.device_policy);
    expect(told).toHaveLength(1);
    expect(told[0].device_policy).toMatchObject({ rule: 'device-asns', client_id: null, mode: 'report-only', would_have_refused: 5, last: 'AS16509' });
    expect(told[0].msg).toBe('device policy device-asns (report-only) would have refused 5 requests');
  });
});

describe('device-scopes', () => {
  it('report-only: a device asking for more than the rule allows gets its code; the count says it would have been refused', async () => {
    const { tv } = await setUp();
    await admin.rule('device-scopes', 'report-only', { client_id: tv.clientId, scopes: ['openid', 'offline_access'] });
    expect((await deviceCodeFrom(t, tv.clientId, HOME_DE, { scope: 'openid email' })).statusCode).toBe(200);
    expect((await deviceCodeFrom(t, tv.clientId, HOME_DE, { scope: 'openid' })).statusCode).toBe(200);
    expect(await admin.counts('device-scopes', tv.clientId)).toMatchObject({ refused: 0, would_have_refused: 1 });
  });

  it('enforce: a scope outside the rule is invalid_scope; a request naming none gets only the allowed ones', async () => {
    const { tv, other } = await setUp();
    await admin.rule('device-scopes', 'enforce', { client_id: tv.clientId, scopes: ['openid', 'offline_access'] });
    const refused = await deviceCodeFrom(t, tv.clientId, HOME_DE, { scope: 'openid email' });
    expect(refused.statusCode).toBe(400);
    expect(refused.json()).toMatchObject({ error: 'invalid_scope' });
    expect(refused.json().error_description).toContain('openid offline_access');
    expect((await deviceCodeFrom(t, tv.clientId, HOME_DE, { scope: 'openid' })).statusCode).toBe(200);
    const narrowed = await codeFrom(tv.clientId, HOME_DE);
    const row = await t.deps.db
      .selectFrom('device_requests')
      .select('scopes')
      .where('device_code_hash', '=', hashOpaque(narrowed.device_code))
      .executeTakeFirstOrThrow();
    expect(row.scopes.sort()).toEqual(['offline_access', 'openid']);
    expect((await deviceCodeFrom(t, other.clientId, HOME_DE, { scope: 'openid email' })).statusCode).toBe(200);
    expect(await admin.counts('device-scopes', tv.clientId)).toMatchObject({ refused: 1, would_have_refused: 0 });
  });

  it('a request naming no scope, of an app none of whose scopes the rule allows: report-only lets it through and counts it, enforce refuses it', async () => {
    t = await startTestApp({ env: { TRUST_PROXY: '127.0.0.1' } });
    admin = await policyAdmin(t);
    const profileOnly = await seedClient(t, { kind: 'tv', scopes: ['profile', 'email'] });
    await admin.rule('device-scopes', 'report-only', { client_id: profileOnly.clientId, scopes: ['openid'] });
    expect((await deviceCodeFrom(t, profileOnly.clientId, HOME_DE)).statusCode).toBe(200);
    expect(await admin.counts('device-scopes', profileOnly.clientId)).toMatchObject({ refused: 0, would_have_refused: 1 });
    await admin.rule('device-scopes', 'enforce', { client_id: profileOnly.clientId, scopes: ['openid'] });
    const refused = await deviceCodeFrom(t, profileOnly.clientId, HOME_DE);
    expect(refused.statusCode).toBe(400);
    expect(refused.json()).toMatchObject({ error: 'invalid_scope' });
    expect(await admin.counts('device-scopes', profileOnly.clientId)).toMatchObject({ refused: 1, would_have_refused: 0 });
  });

  it('enforce: a request approved with a wider scope before the rule gets no tokens; it stays approved, nothing is issued', async () => {
    const { tv } = await setUp();
    const user = await seedUser(t);
    const flow = await codeFrom(tv.clientId, HOME_DE, { scope: 'openid email' });
    const browser = await approverAt(t, { headers: from(HOME_DE) }, user);
    const page = await approvalPage(browser, flow.user_code);
    expect((await decideOnPage(browser, page.body, { action: 'approve', phrase: flow.confirmation_phrase })).statusCode).toBe(200);
    await admin.rule('device-scopes', 'enforce', { client_id: tv.clientId, scopes: ['openid'] });
    t.clock.advance(flow.interval);
    const poll = await pollFrom(t, tv.clientId, flow.device_code, HOME_DE);
    expect(poll.json()).toMatchObject({ error: 'access_denied' });
    expect(poll.json()).not.toHaveProperty('access_token');
    const row = await t.deps.db
      .selectFrom('device_requests')
      .select('status')
      .where('device_code_hash', '=', hashOpaque(flow.device_code))
      .executeTakeFirstOrThrow();
    expect(row.status).toBe('approved');
    expect(await t.deps.db.selectFrom('grants').select('grant_id').where('user_id', '=', user.userId).execute()).toEqual([]);
  });
});

describe('proximity overrides per app', () => {
  /** A request from the US approved from Germany: country_mismatch, which PROXIMITY_POLICY_COUNTRY_MISMATCH (confirm) asks to confirm. */
  async function approveAcrossCountries(clientId: string, user: { email: string; password: string }) {
    const flow = await codeFrom(clientId, HOME_US);
    const browser = await approverAt(t, { headers: from(HOME_DE) }, user);
    const page = await approvalPage(browser, flow.user_code);
    return { flow, browser, page };
  }

  it('report-only deny: the page asks what PROXIMITY_POLICY_* asks and the approval goes through; the count says it would have been refused', async () => {
    const { tv } = await setUp();
    const user = await seedUser(t);
    await admin.rule('proximity-country-mismatch', 'report-only', { client_id: tv.clientId, action: 'deny' });
    const { flow, browser, page } = await approveAcrossCountries(tv.clientId, user);
    expect(page.statusCode).toBe(200);
    expect(page.body).toContain('name="in_front_of_me"');
    const decided = await decideOnPage(browser, page.body, { action: 'approve', phrase: flow.confirmation_phrase, in_front_of_me: 'yes' });
    expect(decided.statusCode).toBe(200);
    t.clock.advance(flow.interval);
    expect((await pollFrom(t, tv.clientId, flow.device_code, HOME_US)).json()).toHaveProperty('access_token');
    expect(await admin.counts('proximity-country-mismatch', tv.clientId)).toMatchObject({ refused: 0, would_have_refused: 1 });
    expect(await refusalsMetric(t, { rule: 'proximity-country-mismatch', level: 'app', outcome: 'would_have_refused' })).toBe(1);
  });

  it("enforce deny: that app's approval is refused and its device hears access_denied; another app keeps PROXIMITY_POLICY_*", async () => {
    const { tv, other } = await setUp();
    const user = await seedUser(t);
    await admin.rule('proximity-country-mismatch', 'enforce', { client_id: tv.clientId, action: 'deny' });
    const { flow, page } = await approveAcrossCountries(tv.clientId, user);
    expect(page.statusCode).toBe(403);
    t.clock.advance(flow.interval);
    expect((await pollFrom(t, tv.clientId, flow.device_code, HOME_US)).json()).toMatchObject({ error: 'access_denied' });
    const elsewhere = await approveAcrossCountries(other.clientId, user);
    expect(elsewhere.page.statusCode).toBe(200);
    expect(elsewhere.page.body).toContain('name="in_front_of_me"');
    expect(await admin.counts('proximity-country-mismatch', tv.clientId)).toMatchObject({ refused: 1, would_have_refused: 0 });
  });

  it("enforce allow: the app's override lifts the extra step PROXIMITY_POLICY_COUNTRY_MISMATCH asks for, for that app only", async () => {
    const { tv, other } = await setUp();
    const user = await seedUser(t);
    await admin.rule('proximity-country-mismatch', 'enforce', { client_id: tv.clientId, action: 'allow' });
    expect((await approveAcrossCountries(tv.clientId, user)).page.body).not.toContain('name="in_front_of_me"');
    expect((await approveAcrossCountries(other.clientId, user)).page.body).toContain('name="in_front_of_me"');
  });

  it("an app's override wins over a global one", async () => {
    const { tv, other } = await setUp();
    const user = await seedUser(t);
    await admin.rule('proximity-country-mismatch', 'enforce', { action: 'deny' });
    await admin.rule('proximity-country-mismatch', 'enforce', { client_id: tv.clientId, action: 'confirm' });
    expect((await approveAcrossCountries(tv.clientId, user)).page.statusCode).toBe(200);
    expect((await approveAcrossCountries(other.clientId, user)).page.statusCode).toBe(403);
  });

  it('proximity-redeemer-mismatch, enforce deny for one app: a poll collecting from elsewhere is refused for good', async () => {
    const { tv } = await setUp();
    const user = await seedUser(t);
    await admin.rule('proximity-redeemer-mismatch', 'enforce', { client_id: tv.clientId, action: 'deny' });
    const flow = await codeFrom(tv.clientId, HOME_DE);
    const browser = await approverAt(t, { headers: from(HOME_DE) }, user);
    const page = await approvalPage(browser, flow.user_code);
    expect((await decideOnPage(browser, page.body, { action: 'approve', phrase: flow.confirmation_phrase })).statusCode).toBe(200);
    t.clock.advance(flow.interval);
    expect((await pollFrom(t, tv.clientId, flow.device_code, HOME_US)).json()).toMatchObject({ error: 'access_denied' });
    t.clock.advance(flow.interval);
    expect((await pollFrom(t, tv.clientId, flow.device_code, HOME_DE)).json()).toMatchObject({ error: 'access_denied' });
    expect(await admin.counts('proximity-redeemer-mismatch', tv.clientId)).toMatchObject({ refused: 1 });
  });
});
