import { afterEach, describe, expect, it } from 'vitest';
import { seedClient, seedUser, startTestApp, FORM, form, type TestApp } from '../helpers/app.js';
import { Browser } from '../helpers/browser.js';
import { approvalPage, approverAt as approverWith, decideOnPage as decide } from '../helpers/approval.js';
import { DEVICE_GRANT } from '../helpers/device.js';
import type { DeviceAuthorizationResponse } from '../../src/oauth/device/authorization.js';

/**
 * Issue 20 §3: the approval page says where and when the request came from, compares it with
 * where the approver is, and applies the operator's policy per signal. Addresses are real public
 * ones the shipped data knows: Deutsche Telekom (DE, AS3320), Comcast (US, AS7922), Hetzner (DE,
 * AS24940, a hosting network).
 */

const TELEKOM_HOME = '79.192.0.1';
const TELEKOM_PHONE = '79.192.0.2';
const COMCAST = '73.0.0.1';
const HETZNER = '88.198.0.1';

let t: TestApp;
afterEach(() => t?.close());

async function setUp(env: Record<string, string> = {}) {
  t = await startTestApp({ env });
  const tv = await seedClient(t, { kind: 'tv', name: 'Living Room TV' });
  const user = await seedUser(t);
  return { tv, user };
}

async function requestFrom(clientId: string, address: string): Promise<DeviceAuthorizationResponse> {
  const res = await t.app.inject({ method: 'POST', url: '/oauth/device/code', headers: FORM, payload: form({ client_id: clientId }), remoteAddress: address });
  expect(res.statusCode, res.body).toBe(200);
  return res.json();
}

const approverAt = (address: string, user: { email: string; password: string }) => approverWith(t, { remoteAddress: address }, user);

const pollFrom = (clientId: string, flow: DeviceAuthorizationResponse) =>
  t.app.inject({
    method: 'POST',
    url: '/oauth/token',
    headers: FORM,
    payload: form({ grant_type: DEVICE_GRANT, device_code: flow.device_code, client_id: clientId }),
  });

async function storedDecision(userCode: string) {
  const { findDeviceRequestByUserCode } = await import('../../src/repositories/device-requests.js');
  const { userCodeHmac } = await import('../../src/oauth/device/user-code.js');
  const row = await findDeviceRequestByUserCode(t.deps.db, userCodeHmac(t.deps.secrets.userCodeKey, userCode));
  return t.deps.db
    .selectFrom('device_requests')
    .select(['status', 'denied_reason', 'decision_context'])
    .where('request_id', '=', row!.request_id)
    .executeTakeFirstOrThrow();
}

describe('where a request came from, on the approval page', () => {
  it("the same public address: says when and where, the device's address, and that it appears to be on your network; no warning", async () => {
    const { tv, user } = await setUp();
    const flow = await requestFrom(tv.clientId, TELEKOM_HOME);
    t.clock.advance(180);
    const browser = await approverAt(TELEKOM_HOME, user);
    const page = await approvalPage(browser, flow.user_code);
    expect(page.statusCode).toBe(200);
    expect(page.body).toContain('Requested 3 minutes ago from <strong>Germany</strong> on <strong>Deutsche Telekom AG</strong>.');
    expect(page.body).toContain(`<span class="address">${TELEKOM_HOME}</span>`);
    expect(page.body).toContain('This device appears to be on your network.');
    // CC BY 4.0: the data's makers are credited where its results are shown.
    expect(page.body).toContain('<a href="https://db-ip.com" rel="noopener noreferrer">DB-IP</a>');
    expect(page.body).not.toContain('phishing-warning');
    expect(page.body).not.toContain('in_front_of_me');
    const approved = await decide(browser, page.body, { action: 'approve', phrase: flow.confirmation_phrase });
    expect(approved.statusCode).toBe(200);
    const recorded = await storedDecision(flow.user_code);
    expect(recorded.decision_context).toMatchObject({
      same_network: true,
      signals: [],
      action: 'allow',
      requester: { asn: 3320 },
      approver: { address: TELEKOM_HOME },
    });
  });

  // Issue 27 §1: one AS is millions of strangers; it is named, never called "your network".
  it('the same AS from another address: names the provider without saying "network", and is recorded as no match', async () => {
    const { tv, user } = await setUp();
    const flow = await requestFrom(tv.clientId, TELEKOM_HOME);
    const browser = await approverAt(TELEKOM_PHONE, user);
    const page = await approvalPage(browser, flow.user_code);
    expect(page.body).toContain('You and this device both connect through Deutsche Telekom AG. That alone does not mean it is yours.');
    expect(page.body).not.toContain('appears to be on your network');
    expect(page.body).not.toContain('phishing-warning');
    expect((await decide(browser, page.body, { action: 'approve', phrase: flow.confirmation_phrase })).statusCode).toBe(200);
    expect((await storedDecision(flow.user_code)).decision_context).toMatchObject({ same_network: false, same_provider: 'Deutsche Telekom AG', signals: [] });
  });

  it("another country: a warning and one more step; approving without it decides nothing, with it approves, and the context reaches the grant's issued event", async () => {
    const { tv, user } = await setUp();
    const flow = await requestFrom(tv.clientId, COMCAST);
    const browser = await approverAt(TELEKOM_PHONE, user);
    const page = await approvalPage(browser, flow.user_code);
    expect(page.body).toContain('from <strong>United States</strong> on <strong>Comcast Cable Communications, LLC</strong>');
    expect(page.body).toContain('This request came from another country than the one you are in.');
    expect(page.body).toContain('If someone sent you this code or link, press Deny. Nobody from Living Room TV will ever ask you for it.');
    expect(page.body).toContain(
      '<input type="checkbox" id="in_front_of_me" name="in_front_of_me" value="yes"> I am setting up a device that is in front of me',
    );
    expect(page.body).not.toMatch(/in_front_of_me"[^>]*checked/);

    const unconfirmed = await decide(browser, page.body, { action: 'approve', phrase: flow.confirmation_phrase });
    expect(unconfirmed.statusCode).toBe(400);
    expect(unconfirmed.body).toContain('Tick “I am setting up a device that is in front of me” to approve, or press Deny.');
    expect((await storedDecision(flow.user_code)).status).toBe('pending');

    const confirmed = await decide(browser, unconfirmed.body, { action: 'approve', phrase: flow.confirmation_phrase, in_front_of_me: 'yes' });
    expect(confirmed.statusCode).toBe(200);
    expect(confirmed.body).toContain('is now connected to your account');
    t.clock.advance(flow.interval);
    expect((await pollFrom(tv.clientId, flow)).statusCode).toBe(200);
    const event = await t.deps.db
      .selectFrom('events')
      .select(['data'])
      .where('user_id', '=', user.userId)
      .where('type', '=', 'grant.issued')
      .executeTakeFirstOrThrow();
    expect(event.data).toMatchObject({ signals: ['country_mismatch'], action: 'confirm', requester: { country: 'US' }, approver: { country: 'DE' } });
    const metrics = await t.deps.metrics.registry.getSingleMetricAsString('device_auth_proximity_decisions_total');
    expect(metrics).toContain('decision="approved",signal="country_mismatch"} 1');
  });

  it('a hosting network: the warning names it; Deny needs no extra step', async () => {
    const { tv, user } = await setUp();
    const flow = await requestFrom(tv.clientId, HETZNER);
    const browser = await approverAt(TELEKOM_PHONE, user);
    const page = await approvalPage(browser, flow.user_code);
    expect(page.body).toContain('This request came from a hosting provider’s network, not from a home or office.');
    expect(page.body).toContain('in_front_of_me');
    const denied = await decide(browser, page.body, { action: 'deny' });
    expect(denied.statusCode).toBe(200);
    expect((await storedDecision(flow.user_code)).decision_context).toMatchObject({ signals: ['hosting_network'] });
    expect((await pollFrom(tv.clientId, flow)).json().error).toBe('access_denied');
  });

  it('policy deny: the request is refused with a clear page, and the device hears access_denied', async () => {
    const { tv, user } = await setUp({ PROXIMITY_POLICY_HOSTING_NETWORK: 'deny' });
    const flow = await requestFrom(tv.clientId, HETZNER);
    const browser = await approverAt(TELEKOM_PHONE, user);
    const page = await approvalPage(browser, flow.user_code);
    expect(page.statusCode).toBe(403);
    expect(page.body).toContain(
      'This request came from Germany on Hetzner Online GmbH, and this service does not accept requests from there. Nothing was connected.',
    );
    expect(page.body).not.toContain('name="phrase"');
    expect(await storedDecision(flow.user_code)).toMatchObject({ status: 'denied', denied_reason: 'policy' });
    const poll = await pollFrom(tv.clientId, flow);
    expect(poll.json()).toMatchObject({ error: 'access_denied' });
    expect(poll.json().error_description).toContain('policy');
  });

  it('policy allow and warn: no step is asked; warn still shows the warning', async () => {
    const { tv, user } = await setUp({ PROXIMITY_POLICY_COUNTRY_MISMATCH: 'allow', PROXIMITY_POLICY_HOSTING_NETWORK: 'warn' });
    const browser = await approverAt(TELEKOM_PHONE, user);
    const allowed = await approvalPage(browser, (await requestFrom(tv.clientId, COMCAST)).user_code);
    expect(allowed.body).not.toContain('phishing-warning');
    expect(allowed.body).not.toContain('in_front_of_me');
    const hostingFlow = await requestFrom(tv.clientId, HETZNER);
    const warned = await approvalPage(browser, hostingFlow.user_code);
    expect(warned.body).toContain('phishing-warning');
    expect(warned.body).not.toContain('in_front_of_me');
    expect((await decide(browser, warned.body, { action: 'approve', phrase: hostingFlow.confirmation_phrase })).statusCode).toBe(200);
  });

  it("an unknown place (a private address that is not the approver's) is said plainly and warned about by default", async () => {
    const { tv, user } = await setUp();
    const flow = await requestFrom(tv.clientId, '10.0.0.5');
    const browser = await approverAt(TELEKOM_PHONE, user);
    const page = await approvalPage(browser, flow.user_code);
    expect(page.body).toContain('from <strong>a private network</strong>');
    expect(page.body).toContain('Where this request came from is not known.');
    expect(page.body).not.toContain('in_front_of_me');
  });

  // Issue 27 §2: the approver's side counts too; an unplaceable approver is never "your network".
  it('an approver who cannot be placed (a private address) is warned that the request cannot be compared', async () => {
    const { tv, user } = await setUp();
    const flow = await requestFrom(tv.clientId, TELEKOM_HOME);
    const browser = await approverAt('10.0.0.9', user);
    const page = await approvalPage(browser, flow.user_code);
    expect(page.body).toContain('Where you are is not known, so this request cannot be compared with it.');
    expect(page.body).not.toContain('on your network');
    expect(page.body).not.toContain('id="same-provider"');
  });

  it('a decision form posted from another address is judged from there: the step is asked for again', async () => {
    const { tv, user } = await setUp();
    const flow = await requestFrom(tv.clientId, TELEKOM_HOME);
    const home = await approverAt(TELEKOM_PHONE, user);
    const page = await approvalPage(home, flow.user_code);
    expect(page.body).not.toContain('in_front_of_me');
    // The same session, its form now sent from a US address.
    const abroad = new Browser(t, { remoteAddress: COMCAST });
    for (const [name, value] of home.cookies) abroad.cookies.set(name, value);
    abroad.csrfToken = home.csrfToken;
    const res = await decide(abroad, page.body, { action: 'approve', phrase: flow.confirmation_phrase });
    expect(res.statusCode).toBe(400);
    expect((await storedDecision(flow.user_code)).status).toBe('pending');
  });
});

describe('the Devices page', () => {
  it('shows where each device signed in and was last used from, and an approved device not yet signed in as waiting', async () => {
    const { tv, user } = await setUp();
    const flow = await requestFrom(tv.clientId, TELEKOM_HOME);
    const browser = await approverAt(TELEKOM_PHONE, user);
    const page = await approvalPage(browser, flow.user_code);
    expect((await decide(browser, page.body, { action: 'approve', phrase: flow.confirmation_phrase })).statusCode).toBe(200);
    const waiting = await browser.get('/account/devices');
    expect(waiting.body).toContain('<strong>Waiting for the device</strong>');
    expect(waiting.body).not.toContain('No devices are signed in.');

    t.clock.advance(flow.interval);
    const poll = await t.app.inject({
      method: 'POST',
      url: '/oauth/token',
      headers: FORM,
      remoteAddress: HETZNER,
      payload: form({ grant_type: DEVICE_GRANT, device_code: flow.device_code, client_id: tv.clientId }),
    });
    expect(poll.statusCode).toBe(200);
    const signedIn = await browser.get('/account/devices');
    expect(signedIn.body).not.toContain('Waiting for the device');
    expect(signedIn.body).toMatch(/Signed in<\/dt>\s*<dd><time[^>]*>[^<]*<\/time>, from Germany · Deutsche Telekom AG<\/dd>/);
    expect(signedIn.body).toMatch(/Last used<\/dt>\s*<dd><time[^>]*>[^<]*<\/time>, from Germany · Hetzner Online GmbH<\/dd>/);
  });
});
