import type { LightMyRequestResponse as Response } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { FORM, form, seedClient, seedUser, startTestApp, type TestApp } from '../helpers/app.js';
import { Browser, inputValue, phraseChoices, signIn } from '../helpers/browser.js';
import { DEVICE_GRANT } from '../helpers/device.js';
import type { DeviceAuthorizationResponse } from '../../src/oauth/device/authorization.js';

/**
 * Issue 20 §4: the pages speak the reader's language, chosen by Accept-Language, English when we
 * have none of theirs. Every page state a German reader can reach is visited, and none may show a
 * sentence left in English.
 */

let t: TestApp;
afterEach(() => t?.close());

const GERMAN = { 'accept-language': 'de-DE,de;q=0.9,en;q=0.5' };
const COMCAST = '73.0.0.1';
const TELEKOM = '79.192.0.2';

/**
 * Words no German sentence of ours contains. What the page shows that is not ours (app names,
 * the device's own description, the phrases, the data credits, the service's name) is cut out first.
 */
const ENGLISH_WORDS =
  /\b(the|your|you|this|that|with|from|has|been|can|are|is|it|of|to|and|not|nothing|please|sign|signed|connect|device|request|approve|deny|wait|minutes)\b/i;

function visibleText(page: string): string {
  return page
    .replace(/<head>[\s\S]*?<\/head>/, ' ')
    .replace(/device-auth/g, ' ')
    .replace(/<p class="muted credits">[\s\S]*?<\/p>/g, ' ')
    .replace(/<label class="phrase"[\s\S]*?<\/label>/g, ' ')
    .replace(/<[^>]+>/g, ' ')
    .replace(/&[a-z]+;|&#\d+;/g, ' ');
}

function expectGerman(response: Response, what: string) {
  expect(response.headers['content-language'], what).toBe('de');
  expect(String(response.headers.vary), what).toMatch(/accept-language/i);
  expect(response.body, what).toContain('<html lang="de">');
  const text = visibleText(response.body);
  expect(ENGLISH_WORDS.exec(text)?.[0], `${what}: ${text.replace(/\s+/g, ' ').trim()}`).toBeUndefined();
}

async function requestCode(clientId: string, remoteAddress = '127.0.0.1'): Promise<DeviceAuthorizationResponse> {
  const res = await t.app.inject({ method: 'POST', url: '/oauth/device/code', headers: FORM, payload: form({ client_id: clientId }), remoteAddress });
  expect(res.statusCode, res.body).toBe(200);
  return res.json();
}

const decide = (browser: Browser, path: string, page: string, fields: Record<string, string>) =>
  browser.post(path, { user_code: inputValue(page, 'user_code'), request_handle: inputValue(page, 'request_handle'), ...fields });

describe("pages in the reader's language", () => {
  it('every page state a German reader reaches is in German, with lang="de", Content-Language and Vary', async () => {
    t = await startTestApp();
    // Names the operator gives its apps are shown as they are: these ones are German too.
    const tv = await seedClient(t, { kind: 'tv', name: 'Wohnzimmer-Fernseher' });
    const bot = await seedClient(t, { kind: 'bot', name: 'Bauroboter' });
    const user = await seedUser(t);
    const browser = new Browser(t, { headers: GERMAN, remoteAddress: TELEKOM });

    expectGerman(await browser.get('/'), 'home');
    const signInPage = await browser.get('/signin');
    expectGerman(signInPage, 'sign-in');
    expect(signInPage.body).toContain('<h1>Anmelden</h1>');
    const wrong = await browser.post('/signin', { email: user.email, password: 'not the password' });
    expect(wrong.statusCode).toBe(401);
    expectGerman(wrong, 'wrong password');
    expect(wrong.body).toContain('E-Mail-Adresse oder Passwort ist falsch.');
    expect((await signIn(browser, user)).statusCode).toBe(303);

    const codeStep = await browser.get('/activate');
    expectGerman(codeStep, 'code step');
    expect(codeStep.body).toContain('Angemeldet als <strong>');
    expectGerman(await browser.post('/activate', { user_code: 'BCDF' }), 'malformed code');
    expectGerman(await browser.post('/activate', { user_code: 'BCDF-GHJK' }), 'unknown code');

    // From another country: the warning and the extra step, in German.
    const far = await requestCode(tv.clientId, COMCAST);
    const approval = await browser.post('/activate', { user_code: far.user_code });
    expectGerman(approval, 'approval page with a warning');
    expect(approval.body).toContain('Angefordert vor weniger als einer Minute aus <strong>Vereinigte Staaten</strong> über <strong>');
    expect(approval.body).toContain('Ich richte ein Gerät ein, das vor mir steht');
    const withoutBox = await decide(browser, '/activate/decision', approval.body, { action: 'approve', phrase: far.confirmation_phrase });
    expect(withoutBox.statusCode).toBe(400);
    expectGerman(withoutBox, 'approval without the box ticked');
    const approved = await decide(browser, '/activate/decision', approval.body, { action: 'approve', phrase: far.confirmation_phrase, in_front_of_me: 'yes' });
    expectGerman(approved, 'connected');
    expect(approved.body).toContain('<h1>Gerät verbunden</h1>');
    expectGerman(await browser.post('/activate', { user_code: far.user_code }), 'a used code');

    const denied = await requestCode(tv.clientId);
    const denyPage = await browser.post('/activate', { user_code: denied.user_code });
    expectGerman(denyPage, 'approval page from this server');
    expectGerman(await decide(browser, '/activate/decision', denyPage.body, { action: 'deny' }), 'denied');

    const botFlow = await requestCode(bot.clientId);
    expectGerman(await browser.post('/activate', { user_code: botFlow.user_code }), 'a bot code on the device page');
    const botPage = await browser.post('/activate/bot', { user_code: botFlow.user_code });
    expectGerman(botPage, 'bot approval page');
    expect(botPage.body).toContain('Welchen Satz zeigt Ihr Bot?');
    const wrongPhrase = phraseChoices(botPage.body).find((phrase) => phrase !== botFlow.confirmation_phrase)!;
    const cancelled = await decide(browser, '/activate/bot/decision', botPage.body, { action: 'approve', phrase: wrongPhrase });
    expectGerman(cancelled, 'cancelled');
    expect(cancelled.body).toContain('<h1>Anfrage abgebrochen</h1>');

    // One device signed in, one approved but waiting for its tokens.
    const waiting = await requestCode(tv.clientId);
    const waitingPage = await browser.post('/activate', { user_code: waiting.user_code });
    await decide(browser, '/activate/decision', waitingPage.body, { action: 'approve', phrase: waiting.confirmation_phrase });
    const poll = await t.app.inject({
      method: 'POST',
      url: '/oauth/token',
      headers: FORM,
      payload: form({ grant_type: DEVICE_GRANT, device_code: far.device_code, client_id: tv.clientId }),
    });
    expect(poll.statusCode, poll.body).toBe(200);
    const devices = await browser.get('/account/devices');
    expectGerman(devices, 'devices');
    expect(devices.body).toContain('<strong>Wartet auf das Gerät</strong>');
    expect(devices.body).toContain('aus Vereinigte Staaten · ');
    const grantId = inputValue(devices.body, 'grant_id')!;
    const signedOut = await browser.follow(await browser.post('/account/devices/sign-out', { grant_id: grantId }));
    expectGerman(signedOut, 'device signed out');
    expect(signedOut.body).toContain('Wohnzimmer-Fernseher wurde abgemeldet.');
    expectGerman(await browser.post('/account/devices/sign-out', { grant_id: grantId }), 'device already signed out');
    expectGerman(await browser.get('/account/apps'), 'connected apps');

    expectGerman(await browser.get('/no-such-page'), 'not found');
    expectGerman(await browser.post('/account/apps/remove', { client_id: tv.clientId }, { csrfToken: 'forged' }), 'form without a valid token');
  });

  it('English is the fallback: no header, a language we do not have, or one refused with q=0', async () => {
    t = await startTestApp();
    for (const header of [undefined, 'fr-FR, ja;q=0.5', 'de;q=0, en;q=0.1', 'de'.padStart(4000, 'x')]) {
      const res = await t.app.inject({ method: 'GET', url: '/signin', headers: header === undefined ? {} : { 'accept-language': header } });
      expect(res.statusCode).toBe(200);
      expect(res.headers['content-language']).toBe('en');
      expect(res.body).toContain('<html lang="en">');
      expect(res.body).toContain('<h1>Sign in</h1>');
    }
  });
});
