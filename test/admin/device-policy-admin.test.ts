import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { seedClient, startTestApp, type TestApp } from '../helpers/app.js';
import { policyAdmin, type PolicyAdmin } from '../helpers/policy.js';

/**
 * Issue 31 §2 and §4: the device policy's admin API. Every field refuses hostile input with a
 * clear 400 and stores nothing; the routes are in the OpenAPI document; the self-assessment is
 * computed from the running configuration and the rules.
 */

let t: TestApp;
let admin: PolicyAdmin;
let tv: { clientId: string };

beforeAll(async () => {
  t = await startTestApp();
  admin = await policyAdmin(t);
  tv = await seedClient(t, { kind: 'tv' });
});
afterAll(async () => {
  await admin.close();
  await t.close();
});

const storedRules = () => t.deps.db.selectFrom('device_policy_rules').select('rule_id').execute();

const LONE_SURROGATE = '\ud800';
const HUGE = 'A'.repeat(60_000);

/** [what, body]: each refused whole with 400, whatever else it holds. */
const HOSTILE: [string, Record<string, unknown>][] = [
  ['an unknown rule', { rule: 'device-everything', mode: 'enforce' }],
  ['a NUL in the rule', { rule: 'device-flow\u0000', mode: 'enforce' }],
  ['an unknown mode', { rule: 'device-flow', mode: 'on' }],
  ['a lone surrogate in the mode', { rule: 'device-flow', mode: `enforce${LONE_SURROGATE}` }],
  ['a NUL in the client id', { rule: 'device-flow', mode: 'enforce', client_id: 'tv\u0000' }],
  ['a lone surrogate in the client id', { rule: 'device-flow', mode: 'enforce', client_id: LONE_SURROGATE }],
  ['a huge client id', { rule: 'device-flow', mode: 'enforce', client_id: HUGE }],
  ['an unknown scope', { rule: 'device-scopes', mode: 'enforce', scopes: ['openid', 'admin'] }],
  ['a scope with a NUL', { rule: 'device-scopes', mode: 'enforce', scopes: ['openid\u0000'] }],
  ['no scope at all', { rule: 'device-scopes', mode: 'enforce', scopes: [] }],
  ['an unknown country', { rule: 'device-countries', mode: 'enforce', countries_block: ['XX'] }],
  ['a list with one unknown country', { rule: 'device-countries', mode: 'enforce', countries_block: ['DE', 'FR', 'EU'] }],
  ['a country in lower case', { rule: 'device-countries', mode: 'enforce', countries_allow: ['de'] }],
  ['a country with a lone surrogate', { rule: 'device-countries', mode: 'enforce', countries_allow: [`D${LONE_SURROGATE}`] }],
  ['a huge country', { rule: 'device-countries', mode: 'enforce', countries_allow: [HUGE] }],
  ['both an allow and a block list', { rule: 'device-countries', mode: 'enforce', countries_allow: ['DE'], countries_block: ['FR'] }],
  ['an ASN above 4294967295', { rule: 'device-asns', mode: 'enforce', asns_block: [4_294_967_296] }],
  ['a negative ASN', { rule: 'device-asns', mode: 'enforce', asns_block: [-1] }],
  ['a list with one bad ASN', { rule: 'device-asns', mode: 'enforce', asns_block: [16509, 1.5] }],
  ['an ASN as text', { rule: 'device-asns', mode: 'enforce', asns_block: ['16509'] }],
  ['too many ASNs', { rule: 'device-asns', mode: 'enforce', asns_block: Array.from({ length: 1001 }, (_, i) => i) }],
  ['an enforced rule without its values', { rule: 'device-asns', mode: 'enforce' }],
  ['values of another rule', { rule: 'device-hosting', mode: 'enforce', asns_block: [16509] }],
  ['an unknown proximity action', { rule: 'proximity-country-mismatch', mode: 'enforce', action: 'block' }],
  ['an unknown field', { rule: 'device-flow', mode: 'enforce', note: 'x' }],
];

describe('hostile input', () => {
  it.each(HOSTILE)('%s: 400 with a problem that names the field, nothing stored', async (_what, body) => {
    const answer = await admin.set(body);
    expect(answer.status, JSON.stringify(answer.body)).toBe(400);
    expect(answer.body).toMatchObject({ type: 'urn:device-auth:problem:invalid-input', status: 400 });
    expect(answer.body.detail.length).toBeGreaterThan(0);
    expect(answer.body.detail.length).toBeLessThan(2000);
    expect(await storedRules()).toEqual([]);
  });

  it('invalid UTF-8 in the body: 400, nothing stored', async () => {
    const bytes = Buffer.concat([Buffer.from('{"rule":"device-flow","mode":"enforce","client_id":"'), Buffer.from([0xc3, 0x28]), Buffer.from('"}')]);
    const res = await admin.app.inject({ method: 'POST', url: '/admin/device-policy/rules', headers: { 'content-type': 'application/json' }, payload: bytes });
    expect(res.statusCode).toBe(400);
    expect(await storedRules()).toEqual([]);
  });

  it('an app that does not exist: 404, nothing stored', async () => {
    const answer = await admin.set({ rule: 'device-flow', mode: 'enforce', client_id: 'no-such-app' });
    expect(answer.status).toBe(404);
    expect(answer.body.detail).toContain('no client no-such-app');
    expect(await storedRules()).toEqual([]);
  });

  it('a bad client_id in the list and report queries: 400', async () => {
    for (const url of ['/admin/device-policy/rules?client_id=%00', '/admin/device-policy/report?client_id=%ED%A0%80']) {
      expect((await admin.app.inject({ method: 'GET', url })).statusCode).toBe(400);
    }
  });
});

describe('rules as stored', () => {
  it('a rule set twice is one rule, at its new values, its counts from zero; list shows an app its own and the global ones', async () => {
    const other = await seedClient(t, { kind: 'tv' });
    await admin.rule('device-countries', 'report-only', { client_id: tv.clientId, countries_block: ['KR', 'KR', 'CN'] });
    const reset = await admin.rule('device-countries', 'enforce', { client_id: tv.clientId, countries_allow: ['DE'] });
    expect(reset).toMatchObject({
      rule: 'device-countries',
      client_id: tv.clientId,
      mode: 'enforce',
      countries_allow: ['DE'],
      countries_block: null,
      refused: 0,
      would_have_refused: 0,
    });
    await admin.rule('device-asns', 'report-only', { asns_block: [16509, 16509, 4_294_967_295] });
    await admin.rule('device-flow', 'enforce', { client_id: other.clientId });

    const list = await admin.app.inject({ method: 'GET', url: `/admin/device-policy/rules?client_id=${tv.clientId}` });
    const items = list.json().items as { rule: string; client_id: string | null; asns_block: number[] | null }[];
    expect(items.map((r) => [r.rule, r.client_id])).toEqual([
      ['device-asns', null],
      ['device-countries', tv.clientId],
    ]);
    expect(items[0]!.asns_block).toEqual([16509, 4_294_967_295]);
    const all = await admin.app.inject({ method: 'GET', url: '/admin/device-policy/rules' });
    expect(all.json().items).toHaveLength(3);
  });

  it('the routes are in the OpenAPI document', async () => {
    const document = (await admin.app.inject({ method: 'GET', url: '/admin/openapi.json' })).json();
    expect(Object.keys(document.paths)).toEqual(expect.arrayContaining(['/admin/device-policy/rules', '/admin/device-policy/report', '/admin/assessment']));
    const body = document.paths['/admin/device-policy/rules'].post.requestBody.content['application/json'].schema;
    expect(Object.keys(body.properties)).toEqual(
      expect.arrayContaining(['rule', 'mode', 'client_id', 'scopes', 'countries_allow', 'countries_block', 'asns_block', 'action']),
    );
  });
});

describe('GET /admin/assessment', () => {
  const assessment = async (app: PolicyAdmin) => {
    const res = await app.app.inject({ method: 'GET', url: '/admin/assessment' });
    expect(res.statusCode, res.body).toBe(200);
    return Object.fromEntries((res.json().mitigations as { id: string; state: string; detail: string }[]).map((m) => [m.id, m]));
  };

  it('names every RFC 10027 mitigation the issue lists, each with a state', async () => {
    const report = await assessment(admin);
    expect(Object.keys(report)).toEqual(
      expect.arrayContaining([
        'proximity_at_approval',
        'proximity_at_redemption',
        'code_lifetime',
        'one_time_codes',
        'guessing_limits',
        'rate_limits',
        'scope_limits_per_app',
        'token_lifetimes',
        'sender_constrained_tokens',
        'decline_as_prominent_as_approve',
        'report_only_rules',
        'forwarded_addresses',
      ]),
    );
  });

  it('follows the running configuration, the rules and what the server saw, not a fixed text', async () => {
    const strict = await startTestApp({
      env: {
        PROXIMITY_POLICY_REDEEMER_MISMATCH: 'deny',
        DEVICE_CODE_TTL: '3600',
        ACCESS_TOKEN_TTL: '600',
        RATE_LIMIT_USER_CODE_PER_IP: '5/60',
        RATE_LIMIT_USER_CODE_PER_USER: '5/60',
      },
    });
    const strictAdmin = await policyAdmin(strict);
    try {
      const app = await seedClient(strict, { kind: 'tv', dpopBoundAccessTokens: true });
      let report = await assessment(strictAdmin);
      expect(report.proximity_at_redemption!.state).toBe('in_place');
      expect(report.code_lifetime!.state).toBe('attention');
      expect(report.code_lifetime!.detail).toContain('3600 s');
      expect(report.token_lifetimes!.state).toBe('in_place');
      expect(report.guessing_limits!.state).toBe('in_place');
      expect(report.rate_limits!.state).toBe('off');
      expect(report.sender_constrained_tokens).toMatchObject({ state: 'in_place', detail: expect.stringContaining('1 of 1') });
      expect(report.scope_limits_per_app!.state).toBe('off');
      expect(report.report_only_rules!.state).toBe('in_place');
      expect(report.forwarded_addresses!.state).toBe('in_place');

      await strictAdmin.rule('device-scopes', 'enforce', { client_id: app.clientId, scopes: ['openid'] });
      await strictAdmin.rule('device-hosting', 'report-only');
      // A forwarded request from a peer TRUST_PROXY does not name (it is unset here).
      await strict.app.inject({ method: 'GET', url: '/healthz', headers: { 'x-forwarded-for': '203.0.113.9' } });
      report = await assessment(strictAdmin);
      expect(report.scope_limits_per_app).toMatchObject({ state: 'partial', detail: expect.stringContaining(`app ${app.clientId}`) });
      expect(report.report_only_rules).toMatchObject({ state: 'attention', detail: expect.stringContaining('device-hosting report-only (every app)') });
      expect(report.device_requests_by_origin!.state).toBe('report_only');
      expect(report.forwarded_addresses).toMatchObject({ state: 'attention', detail: expect.stringContaining('127.0.0.1') });
      expect(report.proximity_at_approval!.state).toBe('attention');
    } finally {
      await strictAdmin.close();
      await strict.close();
    }
  });

  it('the shipped defaults: proximity confirm at approval, warn at redemption (partial), limits on', async () => {
    const defaults = await startTestApp({ env: Object.fromEntries(Object.keys((await import('../helpers/app.js')).NO_RATE_LIMITS).map((k) => [k, ''])) });
    const defaultsAdmin = await policyAdmin(defaults);
    try {
      const report = await assessment(defaultsAdmin);
      expect(report.proximity_at_approval!.state).toBe('in_place');
      expect(report.proximity_at_redemption!.state).toBe('partial');
      expect(report.rate_limits!.state).toBe('in_place');
      expect(report.guessing_limits!.state).toBe('in_place');
      expect(report.decline_as_prominent_as_approve!.state).toBe('in_place');
    } finally {
      await defaultsAdmin.close();
      await defaults.close();
    }
  });
});
