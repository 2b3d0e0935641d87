import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basicAuth, FORM, form, seedClient, seedUser, startTestApp, type TestApp } from '../helpers/app.js';
import { Browser, inputValue, signIn } from '../helpers/browser.js';
import type { DeviceAuthorizationResponse } from '../../src/oauth/device/authorization.js';

/**
 * Issue 27 §4-§5: the approval page in the order a person decides (the app and what it may do,
 * where the request came from, the phrase, the buttons), and under a warning the device's own
 * words only after the buttons, with Deny the primary button. Addresses are real public ones the
 * shipped data knows, given as the connection's own (no proxy): Deutsche Telekom (DE) and
 * Comcast (US).
 */

const TELEKOM = '79.192.0.1';
const COMCAST = '73.0.0.1';

/** What a phisher's device says about itself, to answer the warning in the page's own voice. */
const CLAIM = {
  platform_name: 'IT-managed Teams Room (verified)',
  platform_description: 'the location notice above is expected, tick the box and pick the phrase IT gave you',
};

let t: TestApp;
let tv: { clientId: string };
let bot: { clientId: string; clientSecret: string | null };

beforeAll(async () => {
  t = await startTestApp();
  tv = await seedClient(t, { kind: 'tv', name: 'Living Room TV' });
  bot = await seedClient(t, { kind: 'bot', type: 'confidential', name: 'Helper Bot' });
});
afterAll(() => t.close());

async function requestFrom(address: string, extra: Record<string, string> = {}, app: 'tv' | 'bot' = 'tv'): Promise<DeviceAuthorizationResponse> {
  const headers = app === 'bot' ? { ...FORM, authorization: basicAuth(bot.clientId, bot.clientSecret!) } : FORM;
  const res = await t.app.inject({
    method: 'POST',
    url: '/oauth/device/code',
    headers,
    payload: form({ client_id: app === 'bot' ? bot.clientId : tv.clientId, ...extra }),
    remoteAddress: address,
  });
  expect(res.statusCode, res.body).toBe(200);
  return res.json();
}

async function approverAt(address: string) {
  const browser = new Browser(t, { remoteAddress: address });
  expect((await signIn(browser, await seedUser(t))).statusCode).toBe(303);
  return browser;
}

async function approvalPage(browser: Browser, userCode: string, path = '/activate') {
  await browser.get(path);
  const page = await browser.post(path, { user_code: userCode });
  expect(page.statusCode, page.body).toBe(200);
  return page.body;
}

/** Where each part of the page starts in its HTML; -1 when absent. */
function positions(html: string) {
  const main = html.indexOf('<main>');
  const at = (marker: string) => html.indexOf(marker, main);
  return {
    appName: at('id="app-name"'),
    origin: at('id="request-origin"'),
    warning: at('id="phishing-warning"'),
    phrases: at('<fieldset class="phrases">'),
    buttons: at('<div class="actions">'),
    claimName: at(CLAIM.platform_name),
    claimDescription: at(CLAIM.platform_description),
  };
}

const occurrences = (html: string, text: string) => html.split(text).length - 1;

describe('the approval page, in the order a person decides', () => {
  it('without a warning: the app and its scopes, then the one-line origin, the phrase and the buttons; Approve is primary', async () => {
    const flow = await requestFrom(TELEKOM, CLAIM);
    const html = await approvalPage(await approverAt(TELEKOM), flow.user_code);
    const at = positions(html);
    expect(at.warning).toBe(-1);
    expect(at.appName).toBeGreaterThan(-1);
    // The app name is what the page leads with: nothing of the request's context comes before it.
    expect(at.appName).toBeLessThan(at.origin);
    expect(at.origin).toBeLessThan(at.phrases);
    expect(at.phrases).toBeLessThan(at.buttons);
    // No warning: the device's words describe it beside the app, marked as its own.
    expect(at.claimName).toBeGreaterThan(at.appName);
    expect(at.claimName).toBeLessThan(at.origin);
    expect(html).toContain('What the device says about itself. Nobody has checked it.');
    expect(html).toMatch(
      /<p id="request-origin">Requested less than a minute ago from <strong>Germany<\/strong> on <strong>Deutsche Telekom AG<\/strong>\. <span class="muted">The device’s address: <span class="address">79\.192\.0\.1<\/span><\/span><\/p>/,
    );
    expect(html).toContain(
      '<button type="submit" name="action" value="approve">Approve</button>\n    <button type="submit" name="action" value="deny" class="danger" formnovalidate>Deny</button>',
    );
  });

  it("under a warning: the device's own text comes only after the buttons, once, in a block labelled as its claim; Deny is primary and first", async () => {
    const flow = await requestFrom(COMCAST, CLAIM);
    const html = await approvalPage(await approverAt(TELEKOM), flow.user_code);
    const at = positions(html);
    expect(at.appName).toBeLessThan(at.origin);
    expect(at.origin).toBeLessThan(at.warning);
    expect(at.warning).toBeLessThan(at.phrases);
    expect(at.phrases).toBeLessThan(at.buttons);
    // Never above the warning or between it and the buttons, and not dropped.
    expect(at.claimName).toBeGreaterThan(at.buttons);
    expect(at.claimDescription).toBeGreaterThan(at.buttons);
    expect(occurrences(html, CLAIM.platform_name)).toBe(1);
    expect(occurrences(html, CLAIM.platform_description)).toBe(1);
    expect(html.indexOf('<section class="card device-claim" aria-label="The device’s own description">')).toBeGreaterThan(at.buttons);
    expect(html.slice(at.buttons)).toMatch(
      /<div class="actions">\s*<button type="submit" name="action" value="deny" formnovalidate>Deny<\/button>\s*<button type="submit" name="action" value="approve" class="secondary">Approve<\/button>/,
    );
    // The page leads with the app's registered name, not the device's.
    expect(html.indexOf('Living Room TV', html.indexOf('<main>'))).toBe(html.indexOf('Living Room TV</p>'));
  });

  it('a device that says nothing of itself gets no claim block, warning or not', async () => {
    const flow = await requestFrom(COMCAST);
    const html = await approvalPage(await approverAt(TELEKOM), flow.user_code);
    expect(html).not.toContain('device-claim');
    expect(html).not.toContain('Nobody has checked it');
  });

  it('credits the location data once, in the footer, and only on pages that show it; no time is in UTC', async () => {
    const flow = await requestFrom(COMCAST, CLAIM);
    const browser = await approverAt(TELEKOM);
    const codeStep = await browser.get('/activate');
    expect(codeStep.body).not.toContain('db-ip.com');
    const html = await approvalPage(browser, flow.user_code);
    expect(occurrences(html, 'Location and network data:')).toBe(1);
    expect(occurrences(html, 'href="https://db-ip.com"')).toBe(1);
    expect(html.indexOf('Location and network data:')).toBeGreaterThan(html.indexOf('<footer class="page-footer">'));
    expect(html.indexOf('<footer class="page-footer">')).toBeGreaterThan(html.indexOf('</main>'));
    expect(html).not.toContain('UTC');
    expect(html).toContain('This code works for 10 more minutes.');
  });
});

describe('the data credits, on a refusal that names where the request came from', () => {
  it('a request the policy refuses: the page names the place and credits the data once, in the footer', async () => {
    const strict = await startTestApp({ env: { PROXIMITY_POLICY_COUNTRY_MISMATCH: 'deny' } });
    try {
      const app = await seedClient(strict, { kind: 'tv', name: 'Living Room TV' });
      const started = await strict.app.inject({
        method: 'POST',
        url: '/oauth/device/code',
        headers: FORM,
        payload: form({ client_id: app.clientId }),
        remoteAddress: COMCAST,
      });
      const browser = new Browser(strict, { remoteAddress: TELEKOM });
      expect((await signIn(browser, await seedUser(strict))).statusCode).toBe(303);
      await browser.get('/activate');
      const refused = await browser.post('/activate', { user_code: started.json().user_code });
      expect(refused.statusCode).toBe(403);
      expect(refused.body).toContain(
        'This request came from United States on Comcast Cable Communications, LLC, and this service does not accept requests from there.',
      );
      expect(occurrences(refused.body, 'Location and network data:')).toBe(1);
      expect(refused.body.indexOf('Location and network data:')).toBeGreaterThan(refused.body.indexOf('</main>'));
    } finally {
      await strict.close();
    }
  });
});

describe('bot pages speak of bots', () => {
  it('the bot approval page under a warning never speaks of a device or of something "in front of you"', async () => {
    const flow = await requestFrom(COMCAST, CLAIM, 'bot');
    const browser = await approverAt(TELEKOM);
    const html = await approvalPage(browser, flow.user_code, '/activate/bot');
    const main = html.slice(html.indexOf('<main>'), html.indexOf('</main>'));
    expect(main).toContain('Which phrase does your bot show?');
    expect(main).toContain('I started this myself, on my own bot');
    expect(main).toContain('What the bot says about itself. Nobody has checked it.');
    expect(main).not.toMatch(/in front of/);
    // Any "device" left in the text is the device's own words, quoted after the buttons.
    const text = main.replace(/<[^>]*>/g, ' ');
    expect(text.replaceAll(CLAIM.platform_description, '')).not.toMatch(/device/i);
    const unconfirmed = await browser.post('/activate/bot/decision', {
      user_code: inputValue(html, 'user_code'),
      request_handle: inputValue(html, 'request_handle'),
      action: 'approve',
      phrase: flow.confirmation_phrase,
    });
    expect(unconfirmed.statusCode).toBe(400);
    expect(unconfirmed.body).toContain('Tick “I started this myself, on my own bot” to approve, or press Deny.');
    expect(unconfirmed.body).not.toMatch(/in front of/);
  });
});

describe('the header: who is signed in, "Not you?" and Sign out together', () => {
  it('"Not you?" signs out and goes to sign-in with the way back to the page it was pressed on', async () => {
    const flow = await requestFrom(TELEKOM);
    const browser = await approverAt(TELEKOM);
    const html = await approvalPage(browser, flow.user_code);
    const wayBack = `/activate?user_code=${encodeURIComponent(flow.user_code)}`;
    expect(html).toMatch(
      /<div class="account">\s*<span class="signed-in-as">Signed in as <strong>[^<]+<\/strong><\/span>\s*<form method="post" action="\/signout" class="account-actions">/,
    );
    expect(html).toContain(`<button type="submit" class="link" name="return_to" value="${wayBack.replaceAll('&', '&amp;')}">Not you?</button>`);
    expect(html).toContain('<button type="submit" class="link">Sign out</button>');
    const notYou = await browser.post('/signout', { return_to: wayBack });
    expect(notYou.statusCode).toBe(303);
    expect(notYou.headers.location).toBe(`/signin?return_to=${encodeURIComponent(wayBack)}`);
    // Signed out: the account pages ask to sign in again.
    expect((await browser.get('/account/devices')).headers.location).toBe('/signin?return_to=%2Faccount%2Fdevices');
    // The next person signs in and is back at the code, filled in.
    const next = await signIn(browser, await seedUser(t), wayBack);
    expect(next.headers.location).toBe(wayBack);
    expect(inputValue((await browser.follow(next)).body, 'user_code')).toBe(flow.user_code);
  });

  it.each([
    ['an absolute address', 'https://evil.example/activate', '/activate'],
    ['another host', '//evil.example/activate', '/activate'],
    ['a path outside the pages', '/admin', '/activate'],
    ['a lone surrogate', '/account/apps?\ud800', '/account/apps?%EF%BF%BD'],
  ])('"Not you?" with %s as the way back goes to sign-in with a local one', async (_case, returnTo, expected) => {
    const browser = await approverAt(TELEKOM);
    await browser.get('/account/devices');
    const res = await browser.post('/signout', { return_to: returnTo });
    expect(res.statusCode).toBe(303);
    expect(res.headers.location).toBe(`/signin?return_to=${encodeURIComponent(expected)}`);
  });

  it.each([
    ['NUL', form({ return_to: '/account/devices\u0000' })],
    ['invalid UTF-8', 'return_to=%2Faccount%2F%FF%FE'],
  ])('"Not you?" with %s in the way back is refused with a clear error, and nothing is lost: still signed in', async (_case, body) => {
    const browser = await approverAt(TELEKOM);
    await browser.get('/account/devices');
    const cookie = [...browser.cookies].map(([name, value]) => `${name}=${value}`).join('; ');
    const res = await t.app.inject({
      method: 'POST',
      url: '/signout',
      headers: { ...FORM, cookie },
      payload: `${body}&csrf_token=${encodeURIComponent(browser.csrfToken!)}`,
      remoteAddress: TELEKOM,
    });
    expect(res.statusCode).toBe(400);
    expect(res.body).toContain('could not be read');
    expect((await browser.get('/account/devices')).statusCode).toBe(200);
  });

  it('Sign out alone goes to the sign-in page with no way back, and needs the form token', async () => {
    const browser = await approverAt(TELEKOM);
    await browser.get('/account/apps');
    expect((await browser.post('/signout', {}, { csrfToken: null })).statusCode).toBe(403);
    expect((await browser.get('/account/apps')).statusCode).toBe(200);
    const res = await browser.post('/signout', {});
    expect(res.headers.location).toBe('/signin');
  });
});
