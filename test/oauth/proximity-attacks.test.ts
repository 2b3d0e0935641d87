import { afterEach, describe, expect, it } from 'vitest';
import { seedClient, seedUser, startTestApp, FORM, form, type TestApp } from '../helpers/app.js';
import { approvalPage, approverAt as approverWith, decideOnPage as decide } from '../helpers/approval.js';
import { DEVICE_GRANT } from '../helpers/device.js';
import type { DeviceAuthorizationResponse } from '../../src/oauth/device/authorization.js';
import { hashOpaque } from '../../src/oauth/opaque-tokens.js';

/**
 * Issue 27 §1-§3, end to end over HTTP, as the outside review reproduced them: TRUST_PROXY names
 * the loopback balancer and the parties' public addresses arrive in X-Forwarded-For. What the
 * shipped data says of each address: 104.28.13.1 WARP egress in Singapore and 104.28.0.1 in the
 * US (both Cloudflare AS13335, on the relay list); 3.34.0.1 EC2 in Korea (AS16509) and 3.80.0.1
 * AWS in the US (AS14618), both hosting; 79.192.0.1 a Deutsche Telekom home line (DE, AS3320);
 * 73.0.0.1 Comcast (US, AS7922).
 */

const WARP_SINGAPORE = '104.28.13.1';
const PRIVATE_RELAY_US = '104.28.0.1';
const EC2_KOREA = '3.34.0.1';
const AWS_US = '3.80.0.1';
const HOME_DE = '79.192.0.1';
const HOME_US = '73.0.0.1';

const ALL_DENY = {
  PROXIMITY_POLICY_COUNTRY_MISMATCH: 'deny',
  PROXIMITY_POLICY_HOSTING_NETWORK: 'deny',
  PROXIMITY_POLICY_RELAY_NETWORK: 'deny',
  PROXIMITY_POLICY_UNKNOWN_LOCATION: 'deny',
};

let t: TestApp;
afterEach(() => t?.close());

async function setUp(env: Record<string, string> = {}, logSink?: (line: string) => void) {
  t = await startTestApp({ env: { TRUST_PROXY: '127.0.0.1', ...env }, ...(logSink ? { logSink } : {}) });
  const tv = await seedClient(t, { kind: 'tv', name: 'Living Room TV' });
  const user = await seedUser(t);
  return { tv, user };
}

const from = (address: string) => ({ 'x-forwarded-for': address });

async function requestFrom(clientId: string, address: string): Promise<DeviceAuthorizationResponse> {
  const res = await t.app.inject({ method: 'POST', url: '/oauth/device/code', headers: { ...FORM, ...from(address) }, payload: form({ client_id: clientId }) });
  expect(res.statusCode, res.body).toBe(200);
  return res.json();
}

const approverAt = (address: string, user: { email: string; password: string }) => approverWith(t, { headers: from(address) }, user);

function pollFrom(address: string, clientId: string, flow: DeviceAuthorizationResponse) {
  return t.app.inject({
    method: 'POST',
    url: '/oauth/token',
    headers: { ...FORM, ...from(address) },
    payload: form({ grant_type: DEVICE_GRANT, device_code: flow.device_code, client_id: clientId }),
  });
}

function refreshFrom(address: string, clientId: string, refreshToken: string) {
  return t.app.inject({
    method: 'POST',
    url: '/oauth/token',
    headers: { ...FORM, ...from(address) },
    payload: form({ grant_type: 'refresh_token', refresh_token: refreshToken, client_id: clientId }),
  });
}

const grantsOf = (userId: string) =>
  t.deps.db
    .selectFrom('grants')
    .select(['grant_id', 'signed_in_ip', 'approver_ip', 'redeemer_ip', 'redeemer_action', 'redeemer_signals', 'revoked_at', 'revoked_reason'])
    .where('user_id', '=', userId)
    .execute();

const requestRow = (flow: DeviceAuthorizationResponse) =>
  t.deps.db
    .selectFrom('device_requests')
    .select(['status', 'denied_reason', 'redeemer_ip', 'approver_ip'])
    .where('device_code_hash', '=', hashOpaque(flow.device_code))
    .executeTakeFirstOrThrow();

/** Approves with the step the page asks for, if it asks; the device's poll then collects from `redeemer`. */
async function approveFrom(approver: string, requester: string, user: { email: string; password: string }, clientId: string) {
  const flow = await requestFrom(clientId, requester);
  const browser = await approverAt(approver, user);
  const page = await approvalPage(browser, flow.user_code);
  expect(page.statusCode, page.body).toBe(200);
  const confirm: Record<string, string> = page.body.includes('name="in_front_of_me"') ? { in_front_of_me: 'yes' } : {};
  expect((await decide(browser, page.body, { action: 'approve', phrase: flow.confirmation_phrase, ...confirm })).statusCode).toBe(200);
  t.clock.advance(flow.interval);
  return { flow, browser };
}

const SAME_AS_ATTACKS = [
  [
    'the WARP phisher in Singapore against a victim on iCloud Private Relay in the US',
    WARP_SINGAPORE,
    PRIVATE_RELAY_US,
    ['This request came through a VPN, relay or proxy service shared by many people', 'This request came from another country than the one you are in.'],
  ],
  [
    'an EC2 phisher in Korea against a victim behind a corporate VPN on AWS in the US',
    EC2_KOREA,
    AWS_US,
    ['This request came from a hosting provider’s network', 'This request came from another country than the one you are in.'],
  ],
] as const;

describe('§1 the same AS is no proximity', () => {
  it.each(SAME_AS_ATTACKS)('%s: a warning and the extra step, never "on your network"', async (_name, attacker, victim, warnings) => {
    const { tv, user } = await setUp();
    const flow = await requestFrom(tv.clientId, attacker);
    const browser = await approverAt(victim, user);
    const page = await approvalPage(browser, flow.user_code);
    expect(page.statusCode).toBe(200);
    for (const warning of warnings) expect(page.body).toContain(warning);
    expect(page.body).toContain('id="phishing-warning"');
    expect(page.body).toContain('name="in_front_of_me"');
    expect(page.body).not.toContain('on your network');
    expect(page.body).not.toContain('id="same-provider"');
  });

  it.each(SAME_AS_ATTACKS)('%s, every PROXIMITY_POLICY_* at deny: refused, access_denied, no tokens', async (_name, attacker, victim) => {
    const { tv, user } = await setUp(ALL_DENY);
    const flow = await requestFrom(tv.clientId, attacker);
    const browser = await approverAt(victim, user);
    const refused = await approvalPage(browser, flow.user_code);
    expect(refused.statusCode).toBe(403);
    expect(refused.body).not.toContain('name="phrase"');
    t.clock.advance(flow.interval);
    const poll = await pollFrom(attacker, tv.clientId, flow);
    expect(poll.json()).toMatchObject({ error: 'access_denied' });
    expect(poll.json()).not.toHaveProperty('access_token');
    expect(await grantsOf(user.userId)).toEqual([]);
  });
});

describe('§2 without TRUST_PROXY behind a proxy', () => {
  it('every party has the proxy\'s address: location unknown, never "on your network"; one warning in the log, a detail in /readyz; under deny, no tokens', async () => {
    const lines: string[] = [];
    t = await startTestApp({ env: { PROXIMITY_POLICY_UNKNOWN_LOCATION: 'deny' }, logSink: (line) => lines.push(line) });
    const tv = await seedClient(t, { kind: 'tv' });
    const user = await seedUser(t);
    expect((await t.app.inject({ method: 'GET', url: '/readyz' })).json()).toEqual({ status: 'ready' });

    const flow = await requestFrom(tv.clientId, WARP_SINGAPORE);
    const browser = await approverAt(HOME_DE, user);
    const page = await approvalPage(browser, flow.user_code);
    // Both sides are 127.0.0.1, the proxy: the request is refused as from an unknown place.
    expect(page.statusCode).toBe(403);
    expect(page.body).toContain('This request came from this server itself');
    expect(page.body).not.toContain('on your network');
    t.clock.advance(flow.interval);
    const poll = await pollFrom(WARP_SINGAPORE, tv.clientId, flow);
    expect(poll.json()).toMatchObject({ error: 'access_denied' });
    expect(await grantsOf(user.userId)).toEqual([]);

    const warnings = lines
      .map((line) => JSON.parse(line) as { level: number; msg: string; peer?: string })
      .filter((line) => line.msg.includes('TRUST_PROXY does not name'));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ level: 40, peer: '127.0.0.1' });
    const ready = await t.app.inject({ method: 'GET', url: '/readyz' });
    expect(ready.statusCode).toBe(200);
    expect(ready.json()).toMatchObject({ status: 'ready', detail: { untrusted_forwarding: { peer: '127.0.0.1' } } });

    // One warning per interval: the next comes only after ten minutes more of such requests.
    t.clock.advance(10 * 60 + 1);
    await requestFrom(tv.clientId, WARP_SINGAPORE);
    expect(lines.filter((line) => line.includes('TRUST_PROXY does not name'))).toHaveLength(2);
  });

  it('with TRUST_PROXY naming the peer, nothing is reported', async () => {
    const lines: string[] = [];
    const { tv } = await setUp({}, (line) => lines.push(line));
    await requestFrom(tv.clientId, HOME_DE);
    expect(lines.filter((line) => line.includes('TRUST_PROXY does not name'))).toEqual([]);
    expect((await t.app.inject({ method: 'GET', url: '/readyz' })).json()).toEqual({ status: 'ready' });
  });
});

describe('hostile forwarded addresses', () => {
  it.each([
    ['latin-1 bytes that are no UTF-8', '\u00ff\u00fe10.0.0.1'],
    ['a lone surrogate, escaped as a proxy would pass it', '%ED%A0%80'],
    ['3000 characters', `1.${'1'.repeat(3000)}`],
  ])('a forwarded "address" that is no address (%s) is location unknown, never a match, and the flow completes', async (_name, hostile) => {
    const { tv, user } = await setUp();
    const flow = await requestFrom(tv.clientId, hostile);
    const browser = await approverAt(hostile, user);
    const page = await approvalPage(browser, flow.user_code);
    expect(page.statusCode).toBe(200);
    expect(page.body).toContain('Where this request came from is not known.');
    expect(page.body).not.toContain('on your network');
    expect((await decide(browser, page.body, { action: 'approve', phrase: flow.confirmation_phrase })).statusCode).toBe(200);
    t.clock.advance(flow.interval);
    const poll = await pollFrom(hostile, tv.clientId, flow);
    expect(poll.statusCode, poll.body).toBe(200);
    expect((await grantsOf(user.userId))[0]).toMatchObject({ redeemer_action: 'warn', redeemer_signals: ['unknown_location'] });
  });
});

describe('§3 the redeeming poll is judged like the request', () => {
  it('a residential request collected from a hosting network: under PROXIMITY_POLICY_REDEEMER_MISMATCH=deny, access_denied for this and every later poll, and no grant', async () => {
    const { tv, user } = await setUp({ PROXIMITY_POLICY_REDEEMER_MISMATCH: 'deny' });
    const { flow } = await approveFrom(HOME_DE, HOME_DE, user, tv.clientId);
    const stolen = await pollFrom(AWS_US, tv.clientId, flow);
    expect(stolen.statusCode).toBe(400);
    expect(stolen.json()).toMatchObject({ error: 'access_denied' });
    expect(stolen.json().error_description).toContain('policy');
    t.clock.advance(flow.interval);
    // The device at home polls next: the request is gone for good.
    expect((await pollFrom(HOME_DE, tv.clientId, flow)).json()).toMatchObject({ error: 'access_denied' });
    expect(await grantsOf(user.userId)).toEqual([]);
    expect(await requestRow(flow)).toMatchObject({ status: 'denied', denied_reason: 'redeemer_mismatch', redeemer_ip: AWS_US, approver_ip: HOME_DE });
  });

  it('under deny, polls from home and from the hosting network at once: the hosting network never gets tokens, at most one poll does', async () => {
    const { tv, user } = await setUp({ PROXIMITY_POLICY_REDEEMER_MISMATCH: 'deny' });
    const { flow } = await approveFrom(HOME_DE, HOME_DE, user, tv.clientId);
    const addresses = [AWS_US, HOME_DE, AWS_US, HOME_DE, AWS_US, HOME_DE, AWS_US, HOME_DE];
    const answers = await Promise.all(addresses.map((address) => pollFrom(address, tv.clientId, flow)));
    const issued = answers.flatMap((answer, i) => (answer.statusCode === 200 ? [addresses[i]] : []));
    expect(issued.length).toBeLessThanOrEqual(1);
    expect(issued).not.toContain(AWS_US);
    // Refused by the policy, or too late: the request was already redeemed by the device at home.
    for (const [i, answer] of answers.entries()) if (addresses[i] === AWS_US) expect(['access_denied', 'invalid_grant']).toContain(answer.json().error);
    const grants = await grantsOf(user.userId);
    expect(grants.length).toBe(issued.length);
    for (const grant of grants) expect(grant.redeemer_ip).toBe(HOME_DE);
  });

  it('under warn: tokens, with the decision and both addresses on the grant and a line on the Devices page', async () => {
    const { tv, user } = await setUp();
    const { flow, browser } = await approveFrom(HOME_DE, HOME_DE, user, tv.clientId);
    const poll = await pollFrom(AWS_US, tv.clientId, flow);
    expect(poll.statusCode, poll.body).toBe(200);
    const [grant] = await grantsOf(user.userId);
    expect(grant).toMatchObject({ signed_in_ip: HOME_DE, approver_ip: HOME_DE, redeemer_ip: AWS_US, redeemer_action: 'warn' });
    expect([...grant!.redeemer_signals!].sort()).toEqual(['country_mismatch', 'hosting_network', 'redeemer_mismatch']);
    const devices = await browser.get('/account/devices');
    expect(devices.body).toContain('It collected its sign-in from United States · Amazon.com, Inc., not from where it asked for its code.');
  });

  it('the device collecting from where it asked: allowed, recorded as such, no line on the Devices page', async () => {
    const { tv, user } = await setUp({ PROXIMITY_POLICY_REDEEMER_MISMATCH: 'deny' });
    const { flow, browser } = await approveFrom(HOME_DE, HOME_DE, user, tv.clientId);
    expect((await pollFrom(HOME_DE, tv.clientId, flow)).statusCode).toBe(200);
    expect((await grantsOf(user.userId))[0]).toMatchObject({ redeemer_ip: HOME_DE, redeemer_action: 'allow', redeemer_signals: [] });
    expect((await browser.get('/account/devices')).body).not.toContain('collected its sign-in');
  });
});

describe('§3 refreshes are compared with the rotation they repeat and with the approval', () => {
  async function signedInDevice() {
    const { tv, user } = await setUp();
    const { flow } = await approveFrom(HOME_DE, HOME_DE, user, tv.clientId);
    const poll = await pollFrom(HOME_DE, tv.clientId, flow);
    expect(poll.statusCode, poll.body).toBe(200);
    return { tv, user, refreshToken: poll.json().refresh_token as string };
  }

  it("a copied old refresh token presented 10 s after the device's rotation from another network is reuse: the grant is revoked", async () => {
    const { tv, user, refreshToken } = await signedInDevice();
    const rotated = await refreshFrom(HOME_DE, tv.clientId, refreshToken);
    expect(rotated.statusCode, rotated.body).toBe(200);
    t.clock.advance(10);
    const copied = await refreshFrom(EC2_KOREA, tv.clientId, refreshToken);
    expect(copied.statusCode).toBe(400);
    expect(copied.json()).toMatchObject({ error: 'invalid_grant' });
    expect(copied.json()).not.toHaveProperty('access_token');
    expect((await grantsOf(user.userId))[0]).toMatchObject({ revoked_reason: 'reuse_detected' });
    expect((await refreshFrom(HOME_DE, tv.clientId, rotated.json().refresh_token)).json()).toMatchObject({ error: 'invalid_grant' });
  });

  it("the same retry from the device's own network gets the lost answer again", async () => {
    const { tv, user, refreshToken } = await signedInDevice();
    const rotated = await refreshFrom(HOME_DE, tv.clientId, refreshToken);
    t.clock.advance(10);
    const retried = await refreshFrom('79.192.0.2', tv.clientId, refreshToken);
    expect(retried.statusCode, retried.body).toBe(200);
    expect(retried.json().refresh_token).toBe(rotated.json().refresh_token);
    expect((await grantsOf(user.userId))[0]).toMatchObject({ revoked_at: null });
  });

  it('a refresh from another country than the approval is recorded once per move, and the grant stays', async () => {
    const { tv, user, refreshToken } = await signedInDevice();
    const abroad = await refreshFrom(HOME_US, tv.clientId, refreshToken);
    expect(abroad.statusCode, abroad.body).toBe(200);
    const still = await refreshFrom(HOME_US, tv.clientId, abroad.json().refresh_token);
    expect(still.statusCode).toBe(200);
    const events = await t.deps.db
      .selectFrom('events')
      .select(['type', 'reason', 'client_ip'])
      .where('user_id', '=', user.userId)
      .where('type', '=', 'grant.refreshed_elsewhere')
      .execute();
    expect(events).toEqual([{ type: 'grant.refreshed_elsewhere', reason: 'country_mismatch', client_ip: HOME_US }]);
    const hosted = await refreshFrom(AWS_US, tv.clientId, still.json().refresh_token);
    expect(hosted.statusCode).toBe(200);
    const after = await t.deps.db
      .selectFrom('events')
      .select(['reason'])
      .where('user_id', '=', user.userId)
      .where('type', '=', 'grant.refreshed_elsewhere')
      .orderBy('event_id')
      .execute();
    expect(after.map((event) => event.reason)).toEqual(['country_mismatch', 'country_mismatch hosting_network']);
    expect((await grantsOf(user.userId))[0]).toMatchObject({ revoked_at: null });
  });
});
