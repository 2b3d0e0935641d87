import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildAdminApp } from '../../src/admin-app.js';
import type { DeviceAuthorizationResponse } from '../../src/oauth/device/authorization.js';
import { EVENT_TYPES } from '../../src/events/vocabulary.js';
import { hashOpaque } from '../../src/oauth/opaque-tokens.js';
import { FORM, form, PASSWORD, startTestApp, type TestApp } from '../helpers/app.js';
import { approvalPage, approverAt, decideOnPage } from '../helpers/approval.js';
import { Browser, signIn } from '../helpers/browser.js';
import { DEVICE_GRANT } from '../helpers/device.js';

/**
 * Issue 32 §1: every name of the vocabulary is written by a path that users, devices, apps and
 * operators take over HTTP. The groups below walk those paths on one server; the last test reads
 * the log and finds every name in it. The webhook and Shared Signals names are written and tested
 * where those rooms are built (issue 32 §2, §3), and key_encryption_key.rewrapped, which only the
 * CLI's offline `keys rewrap` writes, where that is tested (test/oauth/key-encryption.test.ts).
 *
 * Addresses arrive in X-Forwarded-For from the trusted loopback balancer; what the shipped data
 * says of them: 79.192.0.1 a Deutsche Telekom home line (DE), 73.0.0.1 Comcast (US).
 */

const HOME_DE = '79.192.0.1';
const HOME_US = '73.0.0.1';
const NOT_OURS = ['webhook.', 'ssf_stream.', 'key_encryption_key.'];

let t: TestApp;
let admin: FastifyInstance;
/** The TV every device flow of these tests runs on. */
let tvId: string;

beforeAll(async () => {
  t = await startTestApp({ env: { TRUST_PROXY: '127.0.0.1' } });
  admin = await buildAdminApp(t.deps, { listener: 'socket', logger: false });
  await admin.ready();
  const tv = await call('POST', '/admin/clients', { name: 'Living Room TV', kind: 'tv', type: 'public' });
  tvId = tv.client_id;
});
afterAll(async () => {
  await admin?.close();
  await t?.close();
});

/** The admin API over its (injected) socket listener: the answer's body, after checking its status. */
async function call(
  method: 'GET' | 'POST' | 'PATCH' | 'PUT' | 'DELETE',
  url: string,
  body?: object,
  status = method === 'POST' && url.match(/^\/admin\/(users|clients)$/) ? 201 : 200,
) {
  const res = await admin.inject({ method, url, ...(body === undefined ? {} : { payload: body }) });
  expect(res.statusCode, `${method} ${url}: ${res.body}`).toBe(status);
  return res.json();
}

const from = (address: string) => ({ 'x-forwarded-for': address });

async function requestFrom(address: string, clientId = tvId): Promise<DeviceAuthorizationResponse> {
  const res = await t.app.inject({ method: 'POST', url: '/oauth/device/code', headers: { ...FORM, ...from(address) }, payload: form({ client_id: clientId }) });
  expect(res.statusCode, res.body).toBe(200);
  return res.json();
}

function tokenFrom(address: string, fields: Record<string, string>) {
  return t.app.inject({ method: 'POST', url: '/oauth/token', headers: { ...FORM, ...from(address) }, payload: form({ client_id: tvId, ...fields }) });
}

async function newUser(email: string) {
  await call('POST', '/admin/users', { email, password: PASSWORD });
  return { email, password: PASSWORD };
}

/** A device signed in from Germany: approved there on the page, collected there. */
async function signedInDevice(user: { email: string; password: string }) {
  const flow = await requestFrom(HOME_DE);
  const browser = await approverAt(t, { headers: from(HOME_DE) }, user);
  const page = await approvalPage(browser, flow.user_code);
  expect((await decideOnPage(browser, page.body, { action: 'approve', phrase: flow.confirmation_phrase })).statusCode).toBe(200);
  t.clock.advance(flow.interval);
  const tokens = await tokenFrom(HOME_DE, { grant_type: DEVICE_GRANT, device_code: flow.device_code });
  expect(tokens.statusCode, tokens.body).toBe(200);
  return tokens.json() as { access_token: string; refresh_token: string };
}

/** Every event of these types, oldest first. */
const eventsOf = (...types: string[]) =>
  t.deps.db
    .selectFrom('events')
    .select(['type', 'reason', 'user_id', 'client_id', 'grant_id', 'client_ip', 'data', 'actor'])
    .where('type', 'in', types)
    .orderBy('event_id')
    .execute();

const ADMIN_OVER_SOCKET = { kind: 'admin', via: 'socket' };

describe('every name of the vocabulary is written by a path over HTTP', () => {
  it('people: created, changed, password changed, banned, unbanned; each names its operator and no email', async () => {
    const user = await newUser('people@example.test');
    await call('PATCH', `/admin/users/${user.email}`, { name: 'People' });
    await call('PUT', `/admin/users/${user.email}/password`, { password: 'a brand new password' });
    await call('POST', `/admin/users/${user.email}/ban`);
    await call('POST', `/admin/users/${user.email}/ban`); // banned already: no second event
    await call('POST', `/admin/users/${user.email}/unban`);
    const events = await eventsOf('user.created', 'user.changed', 'user.password_changed', 'user.banned', 'user.unbanned');
    const { user_id: userId } = await call('GET', `/admin/users/${user.email}`);
    expect(events.filter((e) => e.user_id === userId).map((e) => e.type)).toEqual([
      'user.created',
      'user.changed',
      'user.password_changed',
      'user.banned',
      'user.unbanned',
    ]);
    for (const event of events) expect(event.actor).toEqual(ADMIN_OVER_SOCKET);
    expect(events.find((e) => e.type === 'user.changed')!.data).toEqual({ fields: ['name'] });
    expect(JSON.stringify(events)).not.toMatch(/people@example|brand new password/);
  });

  it('sessions: signed in, sign-in refused, signed out', async () => {
    const user = await newUser('sessions@example.test');
    const stranger = new Browser(t, { headers: from(HOME_US) });
    expect((await signIn(stranger, { email: user.email, password: 'not the password' })).statusCode).toBe(401);
    const browser = new Browser(t, { headers: from(HOME_DE) });
    // The page after sign-in carries the new session's CSRF token.
    await browser.follow(await signIn(browser, user));
    expect((await browser.post('/signout', {})).statusCode).toBe(303);
    const events = await t.deps.db
      .selectFrom('events')
      .select(['type', 'reason', 'client_ip'])
      .where('type', 'like', 'session.%')
      .where('user_id', '=', (await call('GET', `/admin/users/${user.email}`)).user_id)
      .orderBy('event_id')
      .execute();
    expect(events).toEqual([
      { type: 'session.sign_in_refused', reason: 'wrong_credentials', client_ip: HOME_US },
      { type: 'session.signed_in', reason: null, client_ip: HOME_DE },
      { type: 'session.signed_out', reason: null, client_ip: HOME_DE },
    ]);
  });

  it('the device flow: created, approved, cancelled by a wrong phrase, denied, refused by a proximity rule', async () => {
    const user = await newUser('device@example.test');
    await signedInDevice(user);
    const browser = await approverAt(t, { headers: from(HOME_DE) }, user);
    const wrong = await requestFrom(HOME_DE);
    const wrongPage = await approvalPage(browser, wrong.user_code);
    const otherPhrase = [...wrongPage.body.matchAll(/name="phrase" value="([^"]*)"/g)].map((m) => m[1]).find((p) => p !== wrong.confirmation_phrase)!;
    await decideOnPage(browser, wrongPage.body, { action: 'approve', phrase: otherPhrase });
    const denied = await requestFrom(HOME_DE);
    await decideOnPage(browser, (await approvalPage(browser, denied.user_code)).body, { action: 'deny' });
    // A request from another country than its approver, under this TV's rule that denies exactly that.
    await call('POST', '/admin/device-policy/rules', { rule: 'proximity-country-mismatch', mode: 'enforce', action: 'deny', client_id: tvId });
    const far = await requestFrom(HOME_US);
    expect((await approvalPage(browser, far.user_code)).statusCode).toBe(403);
    await call('POST', '/admin/device-policy/rules', { rule: 'proximity-country-mismatch', mode: 'off', client_id: tvId });
    // Each request's own events (a rule's counts are recorded apart, per flush: the next test).
    const events = (
      await eventsOf('device_request.created', 'device_request.approved', 'device_request.cancelled', 'device_request.denied', 'device_request.refused')
    ).filter((e) => (e.data as { request_id?: string } | null)?.request_id !== undefined);
    expect(events.filter((e) => e.type !== 'device_request.created').map((e) => `${e.type}:${e.reason}`)).toEqual([
      'device_request.approved:null',
      'device_request.cancelled:wrong_phrase',
      'device_request.denied:user_denied',
      'device_request.refused:policy',
    ]);
    expect(events.filter((e) => e.type === 'device_request.created')).toHaveLength(4);
    for (const event of events) expect(event.client_id).toBe(tvId);
    // Each decision was made from Germany; the last request came from the US.
    expect(events.map((e) => e.client_ip)).toEqual([HOME_DE, HOME_DE, HOME_DE, HOME_DE, HOME_DE, HOME_DE, HOME_US, HOME_DE]);
  });

  it("the operator's device policy: refusals and report-only refusals, recorded as such, per app; every change of a rule", async () => {
    const blocked = await call('POST', '/admin/clients', { name: 'Blocked TV', kind: 'tv', type: 'public' });
    const watched = await call('POST', '/admin/clients', { name: 'Watched TV', kind: 'tv', type: 'public' });
    await call('POST', '/admin/device-policy/rules', { rule: 'device-flow', mode: 'enforce', client_id: blocked.client_id });
    await call('POST', '/admin/device-policy/rules', { rule: 'device-flow', mode: 'report-only', client_id: watched.client_id });
    for (let i = 0; i < 2; i++) {
      const refused = await t.app.inject({ method: 'POST', url: '/oauth/device/code', headers: FORM, payload: form({ client_id: blocked.client_id }) });
      expect(refused.statusCode).toBe(400);
    }
    await requestFrom(HOME_DE, watched.client_id);
    await t.deps.devicePolicies.flush();
    // Counted in memory and recorded with each flush (once a second, and just now): summed over the flushes.
    const refusals = await eventsOf('device_request.refused');
    const counted = (clientId: string) => {
      const of = refusals.filter((e) => e.client_id === clientId);
      const data = of.map((e) => e.data as { rule: string; mode: string; refused: number; would_have_refused: number });
      return {
        reasons: [...new Set(of.map((e) => e.reason))],
        rules: [...new Set(data.map((d) => `${d.rule} ${d.mode}`))],
        refused: data.reduce((sum, d) => sum + d.refused, 0),
        would_have_refused: data.reduce((sum, d) => sum + d.would_have_refused, 0),
      };
    };
    expect(counted(blocked.client_id)).toEqual({ reasons: ['policy'], rules: ['device-flow enforce'], refused: 2, would_have_refused: 0 });
    expect(counted(watched.client_id)).toEqual({ reasons: ['policy_report_only'], rules: ['device-flow report-only'], refused: 0, would_have_refused: 1 });
    const changes = await eventsOf('device_policy.changed');
    expect(changes.filter((e) => e.client_id === blocked.client_id)).toEqual([
      expect.objectContaining({ actor: ADMIN_OVER_SOCKET, data: expect.objectContaining({ rule: 'device-flow', mode: 'enforce' }) }),
    ]);
  });

  it('grants: issued, rotated, retried, refreshed elsewhere, revoked by the app', async () => {
    const user = await newUser('grants@example.test');
    const first = await signedInDevice(user);
    const rotated = await tokenFrom(HOME_DE, { grant_type: 'refresh_token', refresh_token: first.refresh_token });
    expect(rotated.statusCode, rotated.body).toBe(200);
    // The answer was lost: the same refresh again within the retry window gets it again.
    const retried = await tokenFrom(HOME_DE, { grant_type: 'refresh_token', refresh_token: first.refresh_token });
    expect(retried.json().refresh_token).toBe(rotated.json().refresh_token);
    const abroad = await tokenFrom(HOME_US, { grant_type: 'refresh_token', refresh_token: rotated.json().refresh_token });
    expect(abroad.statusCode, abroad.body).toBe(200);
    const revoked = await t.app.inject({
      method: 'POST',
      url: '/oauth/revoke',
      headers: FORM,
      payload: form({ client_id: tvId, token: abroad.json().access_token }),
    });
    expect(revoked.statusCode).toBe(200);
    const { user_id: userId } = await call('GET', `/admin/users/${user.email}`);
    const events = await eventsOf('grant.issued', 'grant.rotated', 'grant.retried', 'grant.refreshed_elsewhere', 'grant.revoked');
    expect(events.filter((e) => e.user_id === userId).map((e) => `${e.type}:${e.reason}`)).toEqual([
      'grant.issued:device_code',
      'grant.rotated:null',
      'grant.retried:null',
      'grant.rotated:null',
      'grant.refreshed_elsewhere:country_mismatch',
      'grant.revoked:revoked_by_app',
    ]);
  });

  it('apps: created, changed, disabled, enabled, secret rotated, deleted (each live grant revoked first)', async () => {
    const shop = await call('POST', '/admin/clients', { name: 'Shop', kind: 'web', type: 'confidential' });
    await call('PATCH', `/admin/clients/${shop.client_id}`, { name: 'Shop 2', scopes: ['openid'] });
    await call('POST', `/admin/clients/${shop.client_id}/disable`);
    await call('POST', `/admin/clients/${shop.client_id}/disable`); // disabled already: no second event
    await call('POST', `/admin/clients/${shop.client_id}/enable`);
    await call('POST', `/admin/clients/${shop.client_id}/secret`, { grace_period_seconds: 60 });
    await call('DELETE', `/admin/clients/${shop.client_id}`);
    const events = await eventsOf('app.created', 'app.changed', 'app.disabled', 'app.enabled', 'app.secret_rotated', 'app.deleted');
    const shops = events.filter((e) => e.client_id === shop.client_id);
    expect(shops.map((e) => e.type)).toEqual(['app.created', 'app.changed', 'app.disabled', 'app.enabled', 'app.secret_rotated', 'app.deleted']);
    for (const event of shops) expect(event.actor).toEqual(ADMIN_OVER_SOCKET);
    expect(shops[1]!.data).toEqual({ fields: ['name', 'scopes'] });
    expect(JSON.stringify(shops)).not.toContain(shop.client_secret);
    // A deleted app's grants end one by one, each with its event, before the cascade removes them.
    const gone = await call('POST', '/admin/clients', { name: 'Gone TV', kind: 'tv', type: 'public' });
    const viewer = await newUser('viewer@example.test');
    const saved = tvId;
    tvId = gone.client_id;
    try {
      await signedInDevice(viewer);
    } finally {
      tvId = saved;
    }
    await call('DELETE', `/admin/clients/${gone.client_id}`);
    const ends = await eventsOf('grant.revoked', 'app.deleted');
    expect(ends.filter((e) => e.client_id === gone.client_id).map((e) => `${e.type}:${e.reason}`)).toEqual(['grant.revoked:app_deleted', 'app.deleted:null']);
    // Still listed by the admin API, the app's name gone with it.
    const listed = await call('GET', `/admin/events?app=${gone.client_id}&type=grant.revoked,app.deleted`);
    expect(listed.items.map((e: { type: string; app: string | null }) => [e.type, e.app])).toEqual([
      ['grant.revoked', null],
      ['app.deleted', null],
    ]);
  });

  it('signing keys: rotated and revoked, by the operator', async () => {
    const rotation = await call('POST', '/admin/keys/rotate');
    await call('POST', `/admin/keys/${rotation.next.kid}/revoke`);
    const events = await eventsOf('signing_key.rotated', 'signing_key.revoked');
    expect(events.map((e) => [e.type, e.reason, e.actor])).toEqual([
      ['signing_key.rotated', 'operator', ADMIN_OVER_SOCKET],
      ['signing_key.revoked', null, ADMIN_OVER_SOCKET],
    ]);
    expect(events[1]!.data).toEqual({ kid: rotation.next.kid, was_signing: false });
  });

  it('a deleted user: every grant revoked with its event, then user.deleted; the history stays by id, never naming the email', async () => {
    const user = await newUser('leaver@example.test');
    await signedInDevice(user);
    const { user_id: userId } = await call('GET', `/admin/users/${user.email}`);
    await call('DELETE', `/admin/users/${user.email}`);
    const history = await call('GET', `/admin/events?user=${userId}`);
    expect(history.items.map((e: { type: string; reason: string | null }) => `${e.type}:${e.reason}`)).toEqual([
      'user.created:null',
      'session.signed_in:null',
      'device_request.approved:null',
      'grant.issued:device_code',
      'grant.revoked:user_deleted',
      'user.deleted:null',
    ]);
    expect(JSON.stringify(history)).not.toContain('leaver@');
    const everything = await t.deps.db.selectFrom('events').select(['data', 'actor', 'reason']).execute();
    expect(JSON.stringify(everything)).not.toContain('leaver@');
    // The email no longer names anyone.
    expect((await admin.inject({ method: 'GET', url: `/admin/events?user=${user.email}` })).statusCode).toBe(404);
  });

  it('device requests that expired undecided, when the purge removes them', async () => {
    const flow = await requestFrom(HOME_DE);
    const { request_id: requestId } = await t.deps.db
      .selectFrom('device_requests')
      .select('request_id')
      .where('device_code_hash', '=', hashOpaque(flow.device_code))
      .executeTakeFirstOrThrow();
    t.clock.advance(t.config.deviceCodeTtl + 3600 + 1);
    await call('POST', '/admin/purge');
    // Earlier tests leave other requests pending; the purge expires them in no set order, so this
    // request's own event is found by its id.
    const expired = (await eventsOf('device_request.expired')).filter((e) => (e.data as { request_id?: string } | null)?.request_id === String(requestId));
    expect(expired).toHaveLength(1);
    expect(expired[0]).toMatchObject({ client_id: tvId, data: { status: 'pending' } });
  });

  it('the log holds every name of the vocabulary', async () => {
    const written = new Set((await t.deps.db.selectFrom('events').select('type').distinct().execute()).map((row) => row.type));
    const ours = EVENT_TYPES.filter((type) => !NOT_OURS.some((prefix) => type.startsWith(prefix)));
    expect(ours.filter((type) => !written.has(type))).toEqual([]);
    // And nothing outside it.
    expect([...written].filter((type) => !(EVENT_TYPES as readonly string[]).includes(type))).toEqual([]);
  });
});
