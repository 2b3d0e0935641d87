import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildAdminApp } from '../../src/admin-app.js';
import { afterAnnounced, FORM, form, seedClient, seedUser, startTestApp, type TestApp } from '../helpers/app.js';
import { Browser, inputValue, signIn } from '../helpers/browser.js';
import { createCliTarget, runProgram } from '../helpers/cli.js';
import { DEVICE_GRANT } from '../helpers/device.js';

/**
 * Issue 29 §1: stock RFC 8628 clients (oidc-agent) never show the confirmation phrase. An app's
 * registration says whether its devices do; for one whose devices do not, the device
 * authorization response has no confirmation_phrase member and the approval page asks none,
 * while every proximity signal applies as for other apps.
 */

const TELEKOM_PHONE = '79.192.0.2';
const COMCAST = '73.0.0.1';

let t: TestApp;
let admin: FastifyInstance;
let user: { email: string; password: string; userId: string };

beforeAll(async () => {
  t = await startTestApp();
  admin = await buildAdminApp(t.deps, { listener: 'socket', logger: false });
  user = await seedUser(t);
});
afterAll(async () => {
  await admin.close();
  await t.close();
});

/** An admin API call; a change to a client (PATCH) is answered once the public app has heard of it. */
function adminCall(method: 'POST' | 'PATCH' | 'GET', url: string, payload?: object) {
  const send = () => admin.inject({ method, url, ...(payload && { payload }) });
  return method === 'PATCH' ? afterAnnounced(t, send, (res) => res.statusCode < 300) : send();
}

async function requestCode(clientId: string, remoteAddress = '127.0.0.1') {
  const res = await t.app.inject({ method: 'POST', url: '/oauth/device/code', headers: FORM, payload: form({ client_id: clientId }), remoteAddress });
  expect(res.statusCode, res.body).toBe(200);
  return res.json() as Record<string, unknown> & { device_code: string; user_code: string; interval: number };
}

const pollFor = (clientId: string, deviceCode: string) =>
  t.app.inject({
    method: 'POST',
    url: '/oauth/token',
    headers: FORM,
    payload: form({ grant_type: DEVICE_GRANT, device_code: deviceCode, client_id: clientId }),
  });

async function approvalPage(userCode: string, remoteAddress = '127.0.0.1') {
  const browser = new Browser(t, { remoteAddress });
  expect((await signIn(browser, user)).statusCode).toBe(303);
  await browser.get('/activate');
  const page = await browser.post('/activate', { user_code: userCode });
  expect(page.statusCode, page.body).toBe(200);
  const decide = (fields: Record<string, string>) =>
    browser.post('/activate/decision', { user_code: inputValue(page.body, 'user_code'), request_handle: inputValue(page.body, 'request_handle'), ...fields });
  return { body: page.body, decide };
}

describe('the confirmation_phrase registration field (admin API)', () => {
  it('is true by default, false when registered so, and changes with PATCH', async () => {
    const usual = await adminCall('POST', '/admin/clients', { name: 'Usual TV', kind: 'tv', type: 'public' });
    expect(usual.statusCode, usual.body).toBe(201);
    expect(usual.json().confirmation_phrase).toBe(true);

    for (const [kind, type] of [
      ['tv', 'public'],
      ['bot', 'confidential'],
      ['web', 'confidential'],
      ['web', 'public'],
    ] as const) {
      const created = await adminCall('POST', '/admin/clients', { name: `Stock ${kind}`, kind, type, confirmation_phrase: false });
      expect(created.statusCode, created.body).toBe(201);
      expect(created.json().confirmation_phrase).toBe(false);
      expect((await adminCall('GET', `/admin/clients/${created.json().client_id}`)).json().confirmation_phrase).toBe(false);
    }

    const changed = await adminCall('PATCH', `/admin/clients/${usual.json().client_id}`, { confirmation_phrase: false });
    expect(changed.statusCode, changed.body).toBe(200);
    expect(changed.json().confirmation_phrase).toBe(false);
    const back = await adminCall('PATCH', `/admin/clients/${usual.json().client_id}`, { confirmation_phrase: true });
    expect(back.json().confirmation_phrase).toBe(true);
  });

  it.each([
    ['a string', 'no'],
    ['a number', 0],
    ['null', null],
  ])('refuses %s as its value with 400, changing nothing', async (_name, value) => {
    const { clientId } = await seedClient(t);
    const res = await adminCall('PATCH', `/admin/clients/${clientId}`, { confirmation_phrase: value });
    expect(res.statusCode).toBe(400);
    expect((await adminCall('GET', `/admin/clients/${clientId}`)).json().confirmation_phrase).toBe(true);
  });
});

describe('a device of an app registered without the confirmation phrase', () => {
  it('gets a device authorization response without a confirmation_phrase member; other apps still get one', async () => {
    const stock = await seedClient(t, { confirmationPhrase: false });
    const usual = await seedClient(t);
    const flow = await requestCode(stock.clientId);
    expect(Object.keys(flow).sort()).toEqual(['device_code', 'expires_in', 'interval', 'user_code', 'verification_uri', 'verification_uri_complete']);
    expect(typeof (await requestCode(usual.clientId)).confirmation_phrase).toBe('string');
  });

  it('is approved on a page that asks no phrase, keeps Approve and Deny and names the code to check; the device gets its tokens', async () => {
    const stock = await seedClient(t, { confirmationPhrase: false });
    const flow = await requestCode(stock.clientId);
    const page = await approvalPage(flow.user_code);
    expect(page.body).not.toContain('name="phrase"');
    expect(page.body).not.toContain('Which phrase');
    // Both buttons stay (their order follows the warning a loopback request raises: location unknown).
    expect(page.body).toMatch(/<button type="submit" name="action" value="approve"[^>]*>Approve<\/button>/);
    expect(page.body).toContain('value="deny"');
    expect(page.body).toContain(`on a device in front of you that shows the code ${flow.user_code}`);

    const approved = await page.decide({ action: 'approve' });
    expect(approved.statusCode, approved.body).toBe(200);
    expect(approved.body).toContain('is now connected to your account');
    t.clock.advance(flow.interval);
    const tokens = await pollFor(stock.clientId, flow.device_code);
    expect(tokens.statusCode, tokens.body).toBe(200);
  });

  it('a phrase sent anyway with the approval is no pick: the request is approved, not cancelled', async () => {
    const stock = await seedClient(t, { confirmationPhrase: false });
    const flow = await requestCode(stock.clientId);
    const approved = await (await approvalPage(flow.user_code)).decide({ action: 'approve', phrase: 'AmberFalcon' });
    expect(approved.body).toContain('is now connected to your account');
  });

  it('Deny denies: the device hears access_denied', async () => {
    const stock = await seedClient(t, { confirmationPhrase: false });
    const flow = await requestCode(stock.clientId);
    const denied = await (await approvalPage(flow.user_code)).decide({ action: 'deny' });
    expect(denied.statusCode).toBe(200);
    t.clock.advance(flow.interval);
    expect((await pollFor(stock.clientId, flow.device_code)).json().error).toBe('access_denied');
  });

  it('from another country: the same warning and "in front of me" step as for other apps; approving without it decides nothing', async () => {
    const stock = await seedClient(t, { confirmationPhrase: false, name: 'Stock TV' });
    const flow = await requestCode(stock.clientId, COMCAST);
    const page = await approvalPage(flow.user_code, TELEKOM_PHONE);
    expect(page.body).toContain('This request came from another country than the one you are in.');
    expect(page.body).toContain('<input type="checkbox" id="in_front_of_me" name="in_front_of_me" value="yes">');
    expect(page.body).not.toContain('name="phrase"');

    const unconfirmed = await page.decide({ action: 'approve' });
    expect(unconfirmed.statusCode).toBe(400);
    expect(unconfirmed.body).toContain('Tick “I am setting up a device that is in front of me” to approve, or press Deny.');
    t.clock.advance(flow.interval);
    expect((await pollFor(stock.clientId, flow.device_code)).json().error).toBe('authorization_pending');

    const confirmed = await page.decide({ action: 'approve', in_front_of_me: 'yes' });
    expect(confirmed.body).toContain('is now connected to your account');
  });

  it('what a request asks is fixed when it is made: turning the phrase on or off later changes only later requests', async () => {
    const app = await seedClient(t);
    const withPhrase = await requestCode(app.clientId);
    await adminCall('PATCH', `/admin/clients/${app.clientId}`, { confirmation_phrase: false });
    const without = await requestCode(app.clientId);
    expect(without.confirmation_phrase).toBeUndefined();

    // The earlier request still asks its phrase: approving without one decides nothing.
    const earlier = await approvalPage(withPhrase.user_code);
    expect(earlier.body).toContain('name="phrase"');
    const noPick = await earlier.decide({ action: 'approve' });
    expect(noPick.statusCode).toBe(400);
    const picked = await earlier.decide({ action: 'approve', phrase: String(withPhrase.confirmation_phrase) });
    expect(picked.body).toContain('is now connected to your account');

    await adminCall('PATCH', `/admin/clients/${app.clientId}`, { confirmation_phrase: true });
    // The later one, made while the phrase was off, asks none even now.
    const later = await approvalPage(without.user_code);
    expect(later.body).not.toContain('name="phrase"');
    expect((await later.decide({ action: 'approve' })).body).toContain('is now connected to your account');
  });
});

describe('device-auth client create|update --[no-]confirmation-phrase', () => {
  it('registers an app without the phrase and turns it back on', async () => {
    const target = await createCliTarget();
    try {
      const created = await runProgram(
        ['client', 'create', '--name', 'oidc-agent', '--kind', 'bot', '--type', 'public', '--no-confirmation-phrase'],
        target.env,
      );
      expect(created.code, created.stderr).toBe(0);
      const { client_id, confirmation_phrase } = JSON.parse(created.stdout);
      expect(confirmation_phrase).toBe(false);
      const on = await runProgram(['client', 'update', client_id, '--confirmation-phrase'], target.env);
      expect(on.code, on.stderr).toBe(0);
      expect(JSON.parse(on.stdout).confirmation_phrase).toBe(true);
      const both = await runProgram(['client', 'update', client_id, '--confirmation-phrase', '--no-confirmation-phrase'], target.env);
      expect(both.code).toBe(2);
      expect(both.stderr).toContain('not both');
    } finally {
      await target.cleanup();
    }
    // Three real CLI processes, each opening the database: on a busy 2-core machine, many seconds.
  }, 120_000);
});
