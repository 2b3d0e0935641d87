import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findDeviceRequestByUserCode } from '../../src/repositories/device-requests.js';
import { userCodeHmac } from '../../src/oauth/device/user-code.js';
import { basicAuth, seedClient, seedUser, startTestApp, type TestApp } from '../helpers/app.js';
import { Browser, inputValue, phraseChoices, signedInBrowser } from '../helpers/browser.js';
import { poll, startDeviceFlow } from '../helpers/device.js';
import { fetchingFrom, ICON_HOST, ICON_PNG, pngHandler, startIconServer, type IconServer } from '../helpers/icon-server.js';

let t: TestApp;
let tv: { clientId: string };
let bot: { clientId: string; clientSecret: string | null };
let browser: Browser;
let iconServer: IconServer;

beforeAll(async () => {
  iconServer = await startIconServer();
  iconServer.route('/tv.png', pngHandler);
  t = await startTestApp(fetchingFrom(iconServer));
  tv = await seedClient(t, { kind: 'tv', name: 'Living Room TV' });
  bot = await seedClient(t, { kind: 'bot', type: 'confidential', name: 'Helper Bot' });
  browser = await signedInBrowser(t, await seedUser(t));
});
afterAll(async () => {
  await t.close();
  await iconServer.close();
});

const startTv = (extra: Record<string, string> = {}) => startDeviceFlow(t, tv.clientId, extra);
const startBot = () => startDeviceFlow(t, bot.clientId, {}, { authorization: basicAuth(bot.clientId, bot.clientSecret!) });

async function storedRequest(userCode: string) {
  const row = await findDeviceRequestByUserCode(t.deps.db, userCodeHmac(t.deps.secrets.userCodeKey, userCode));
  if (!row) throw new Error(`no request for ${userCode}`);
  return row;
}

/** The code step, then the approval page, as a user typing `typed` on `path` gets them. */
async function enterCode(typed: string, path = '/activate', as = browser) {
  await as.get(path);
  return as.post(path, { user_code: typed });
}

/** Submits the decision form of an approval page as the browser would. */
function decide(approvalPage: string, action: 'approve' | 'deny', phrase: string | undefined, as = browser, path = '/activate') {
  return as.post(`${path}/decision`, {
    user_code: inputValue(approvalPage, 'user_code'),
    request_handle: inputValue(approvalPage, 'request_handle'),
    action,
    phrase,
  });
}

/** What the device hears on its next poll, after waiting its interval. */
async function devicePoll(deviceCode: string) {
  t.clock.advance(5);
  return poll(t, tv.clientId, deviceCode);
}

describe('code step', () => {
  it.each([
    ['/activate', 'Connect a device'],
    ['/activate/bot', 'Connect a bot'],
  ])('%s shows "%s" with a labelled Code input and a CSRF token', async (path, title) => {
    const res = await browser.get(path);
    expect(res.statusCode).toBe(200);
    expect(res.body).toContain(`<h1>${title}</h1>`);
    expect(res.body).toContain('<label for="user_code">Code</label>');
    expect(res.body).toMatch(/<input type="text" id="user_code" name="user_code"/);
    expect(inputValue(res.body, 'csrf_token')).toBe(browser.csrfToken);
    expect(res.body).toContain(`action="${path}"`);
  });

  it('prefills the code from ?user_code=, normalised', async () => {
    const { user_code } = await startTv();
    const res = await browser.get(`/activate?user_code=${user_code.toLowerCase().replace('-', '')}`);
    expect(inputValue(res.body, 'user_code')).toBe(user_code);
  });

  it.each([
    ['as shown', (code: string) => code],
    ['lowercase', (code: string) => code.toLowerCase()],
    ['without the hyphen', (code: string) => code.replace('-', '')],
    ['lowercase, spaced, without the hyphen', (code: string) => ` ${code.toLowerCase().replace('-', ' ')} `],
  ])('accepts the code %s', async (_case, typed) => {
    const { user_code } = await startTv();
    const res = await enterCode(typed(user_code));
    expect(res.statusCode).toBe(200);
    expect(res.body).toContain('Living Room TV');
    expect(inputValue(res.body, 'user_code')).toBe(user_code);
  });

  it('an unknown code: a clear message, the code step again with the typed code', async () => {
    const res = await enterCode('BCDF-GHJK');
    expect(res.statusCode).toBe(400);
    expect(res.body).toContain('That code was not found.');
    expect(inputValue(res.body, 'user_code')).toBe('BCDF-GHJK');
    expect(res.body).toContain('<label for="user_code">Code</label>');
  });

  it('something that cannot be a code: says what a code looks like', async () => {
    const res = await enterCode('hello');
    expect(res.statusCode).toBe(400);
    expect(res.body).toContain('Codes have 8 letters');
  });

  it('an expired code: a clear message', async () => {
    const { user_code } = await startTv();
    t.clock.advance(t.config.deviceCodeTtl);
    const res = await enterCode(user_code);
    expect(res.statusCode).toBe(410);
    expect(res.body).toContain('That code has expired.');
  });

  it('a used, a denied and a cancelled code each say what happened to them', async () => {
    const used = await startTv();
    await decide((await enterCode(used.user_code)).body, 'approve', used.confirmation_phrase);
    const usedAgain = await enterCode(used.user_code);
    expect(usedAgain.statusCode).toBe(410);
    expect(usedAgain.body).toContain('That code has already been used.');

    const denied = await startTv();
    await decide((await enterCode(denied.user_code)).body, 'deny', undefined);
    expect((await enterCode(denied.user_code)).body).toContain('That request was denied.');

    const cancelled = await startTv();
    const approval = await enterCode(cancelled.user_code);
    await decide(
      approval.body,
      'approve',
      phraseChoices(approval.body).find((p) => p !== cancelled.confirmation_phrase),
    );
    const cancelledAgain = await enterCode(cancelled.user_code);
    expect(cancelledAgain.body).toContain('That request was cancelled because a phrase that did not match was picked.');
    expect(cancelledAgain.body).not.toContain('already been used');
  });

  it('the code step says how long a code works and what to do when it runs out; it speaks of bots on the bot page', async () => {
    const device = await browser.get('/activate');
    expect(device.body).toContain('A code works for 10 minutes after the device shows it; if it runs out, start again on the device to get a new one.');
    const botPage = await browser.get('/activate/bot');
    expect(botPage.body).toContain('Enter the code shown on your bot');
  });

  it('every page says who is signed in, with a way out', async () => {
    const page = await browser.get('/activate');
    expect(page.body).toMatch(
      /<span class="signed-in-as">Signed in as <strong>user-[^<]+@example\.test<\/strong><\/span>\s*<form method="post" action="\/signout" class="account-actions">/,
    );
    expect(page.body).toContain('<button type="submit" class="link" name="return_to" value="/activate">Not you?</button>');
  });

  it.each([
    ['a bot code on /activate', startBot, '/activate', 'That code belongs to a bot.', '/activate/bot', 'Connect a bot'],
    ['a TV code on /activate/bot', startTv, '/activate/bot', 'That code belongs to a device, not a bot.', '/activate', 'Connect a device'],
  ])('%s: a message with a link to the right page, keeping the code', async (_case, start, typedOn, message, rightPage, linkText) => {
    const { user_code } = await start();
    const res = await enterCode(user_code, typedOn);
    expect(res.statusCode).toBe(400);
    expect(res.body).toContain(message);
    expect(res.body).toContain(`<a href="${rightPage}?user_code=${user_code}">${linkText}</a>`);
    expect(phraseChoices(res.body)).toHaveLength(0);
  });

  it('a bot code on /activate/bot reaches the approval step', async () => {
    const { user_code } = await startBot();
    const res = await enterCode(user_code, '/activate/bot');
    expect(res.statusCode).toBe(200);
    expect(res.body).toContain('Helper Bot');
    expect(res.body).toContain('action="/activate/bot/decision"');
  });

  it('a signed-out POST of a code goes to sign-in, keeping the code', async () => {
    const anonymous = new Browser(t);
    await anonymous.get('/signin');
    const res = await anonymous.post('/activate', { user_code: 'BCDF-GHJK' });
    expect(res.statusCode).toBe(303);
    expect(res.headers.location).toBe(`/signin?return_to=${encodeURIComponent('/activate?user_code=BCDF-GHJK')}`);
  });
});

describe('approval step', () => {
  const platform = () => ({
    scope: 'openid profile email offline_access',
    platform_name: '<script>alert(1)</script>',
    platform_description: 'Kitchen tablet "by the fridge" & <b>friends</b>',
    platform_icon: iconServer.url('/tv.png?size=48&x="onerror="alert(1)'),
  });

  /** A request with every platform field, once the server has fetched its icon. */
  async function startTvWithPlatform() {
    const started = await startTv(platform());
    await t.deps.platformIcons.settled();
    return started;
  }

  it("says how long the code still works and what to do when it runs out; asks a bot's owner what their bot shows", async () => {
    const { user_code } = await startTv();
    t.clock.advance(4 * 60 + 30);
    const approval = await enterCode(user_code);
    expect(approval.body).toContain('This code works for 6 more minutes. If it runs out, start again on your device to get a new code.');
    expect(approval.body).not.toContain('UTC');
    expect(approval.body).toContain('Which phrase does your device show?');
    const botFlow = await startBot();
    const botApproval = await enterCode(botFlow.user_code, '/activate/bot');
    expect(botApproval.body).toContain('Which phrase does your bot show?');
    expect(botApproval.body).toContain('on your own bot');
    expect(botApproval.body).not.toContain('in front of you');
  });

  it('shows the app name, the scopes in plain words and each platform field marked Unverified', async () => {
    const { user_code } = await startTvWithPlatform();
    const res = await enterCode(user_code);
    expect(res.statusCode).toBe(200);
    expect(res.body).toContain('<p class="app-name" id="app-name">Living Room TV</p>');
    for (const words of ['Confirm who you are', 'See your name', 'See your email address', 'Stay signed in until you sign it out']) {
      expect(res.body).toContain(`<li>${words}</li>`);
    }
    expect(res.body).toContain('&lt;script&gt;alert(1)&lt;/script&gt; <span class="unverified">Unverified</span>');
    expect(res.body).toContain('Kitchen tablet &quot;by the fridge&quot; &amp; &lt;b&gt;friends&lt;/b&gt; <span class="unverified">Unverified</span>');
    expect(res.body.match(/<span class="unverified">Unverified<\/span>/g)).toHaveLength(3);
  });

  it('escapes every platform field: no markup or attribute of the device reaches the page', async () => {
    const { user_code } = await startTvWithPlatform();
    const res = await enterCode(user_code);
    expect(res.body).not.toContain('<script>');
    expect(res.body).not.toContain('<b>');
    expect(res.body).not.toContain('"onerror="');
  });

  it("shows the icon the server fetched, from our own origin, never the device's URL, marked Unverified", async () => {
    const { user_code } = await startTvWithPlatform();
    const res = await enterCode(user_code);
    const img = /<img [^>]*>/.exec(res.body)?.[0] ?? '';
    expect(img).toContain(`src="/icons/${createHash('sha256').update(ICON_PNG).digest('hex')}"`);
    expect(res.body).not.toContain(ICON_HOST);
    expect(res.body).toMatch(/<img [^>]*> <span class="unverified">Unverified<\/span>/);
  });

  it('an icon the server could not fetch is not shown at all', async () => {
    const { user_code } = await startTv({ ...platform(), platform_icon: iconServer.url('/missing.png') });
    await t.deps.platformIcons.settled();
    const res = await enterCode(user_code);
    expect(res.body).not.toContain('<img');
    expect(res.body.match(/<span class="unverified">Unverified<\/span>/g)).toHaveLength(2);
  });

  it('without platform fields there is nothing to mark and no image', async () => {
    const { user_code } = await startTv();
    const res = await enterCode(user_code);
    expect(res.body).not.toContain('Unverified');
    expect(res.body).not.toContain('<img');
  });

  it('offers the three phrase choices as labelled radios, in the stored order, the same on reload', async () => {
    const { user_code, confirmation_phrase } = await startTv();
    const stored = await storedRequest(user_code);
    const first = await enterCode(user_code);
    expect(phraseChoices(first.body)).toEqual(stored.phrase_choices);
    expect(phraseChoices(first.body)).toHaveLength(3);
    expect(phraseChoices(first.body)).toContain(confirmation_phrase);
    expect(first.body).toMatch(/<fieldset class="phrases">\s*<legend>Which phrase does your device show\?<\/legend>/);
    stored.phrase_choices!.forEach((phrase, index) => {
      expect(first.body).toContain(
        `<label class="phrase" for="phrase-${index}"><input type="radio" id="phrase-${index}" name="phrase" value="${phrase}" required> ${phrase}</label>`,
      );
    });
    const reload = await enterCode(user_code);
    expect(phraseChoices(reload.body)).toEqual(stored.phrase_choices);
  });

  it('has Approve and Deny buttons; Deny works without a phrase chosen', async () => {
    const { user_code } = await startTv();
    const res = await enterCode(user_code);
    // Both sides on loopback are "location unknown" (issue 27 §2), never the same network: the
    // page warns, so Deny leads (the unwarned order: test/pages/approval-page.test.ts).
    expect(res.body).toContain('id="phishing-warning"');
    expect(res.body).toContain('<button type="submit" name="action" value="approve" class="secondary">Approve</button>');
    expect(res.body).toContain('<button type="submit" name="action" value="deny" formnovalidate>Deny</button>');
  });
});

describe('decision', () => {
  it('approve with the right phrase: "Device connected", and the device gets its tokens', async () => {
    const { user_code, device_code, confirmation_phrase } = await startTv();
    const approval = await enterCode(user_code);
    const res = await decide(approval.body, 'approve', confirmation_phrase);
    expect(res.statusCode).toBe(200);
    expect(res.body).toContain('<h1>Device connected</h1>');
    expect(res.body).toContain(
      '<p class="result success" role="status">Living Room TV is now connected to your account. You can close this window and return to your device.</p>',
    );
    const tokens = await devicePoll(device_code);
    expect(tokens.statusCode).toBe(200);
    expect(tokens.json().access_token).toMatch(/^da_at_/);
  });

  it('the approval records the signed-in user and the time they signed in', async () => {
    const user = await seedUser(t);
    const signedInAt = t.clock.now();
    const someone = await signedInBrowser(t, user);
    t.clock.advance(60);
    const { user_code, confirmation_phrase } = await startTv();
    const approval = await enterCode(user_code, '/activate', someone);
    await decide(approval.body, 'approve', confirmation_phrase, someone);
    const row = await t.deps.db
      .selectFrom('device_requests')
      .select(['user_id', 'auth_time', 'status'])
      .where('request_id', '=', (await storedRequest(user_code)).request_id)
      .executeTakeFirstOrThrow();
    expect(row).toEqual({ user_id: user.userId, auth_time: signedInAt, status: 'approved' });
  });

  it('a bot is approved on /activate/bot', async () => {
    const { user_code, confirmation_phrase } = await startBot();
    const approval = await enterCode(user_code, '/activate/bot');
    const res = await decide(approval.body, 'approve', confirmation_phrase, browser, '/activate/bot');
    expect(res.statusCode).toBe(200);
    expect(res.body).toContain('<h1>Bot connected</h1>');
    expect(res.body).toContain('Helper Bot is now connected to your account. You can close this window and return to your bot.');
    expect((await storedRequest(user_code)).status).toBe('approved');
  });

  it('approve with a wrong phrase: the request is cancelled, the page says to start again, the device hears access_denied', async () => {
    const { user_code, device_code, confirmation_phrase } = await startTv();
    const approval = await enterCode(user_code);
    const decoy = phraseChoices(approval.body).find((phrase) => phrase !== confirmation_phrase);
    const res = await decide(approval.body, 'approve', decoy);
    expect(res.body).toContain('<h1>Request cancelled</h1>');
    expect(res.body).toContain(
      '<p class="result warning" role="status">That phrase does not match the one on your device, so the request has been cancelled for your safety',
    );
    expect((await devicePoll(device_code)).json().error).toBe('access_denied');
  });

  it('deny: "Request denied.", and the device hears access_denied', async () => {
    const { user_code, device_code } = await startTv();
    const approval = await enterCode(user_code);
    const res = await decide(approval.body, 'deny', undefined);
    expect(res.statusCode).toBe(200);
    expect(res.body).toContain('<h1>Request denied</h1>');
    // A denial is not a success.
    expect(res.body).toContain('<p class="result neutral" role="status">Nothing was connected: Living Room TV gets no access to your account.');
    expect(res.body).not.toContain('success');
    expect((await devicePoll(device_code)).json().error).toBe('access_denied');
  });

  it('approve without choosing a phrase changes nothing', async () => {
    const { user_code } = await startTv();
    const approval = await enterCode(user_code);
    const res = await decide(approval.body, 'approve', undefined);
    expect(res.statusCode).toBe(400);
    expect(res.body).toContain('Choose the phrase your device shows');
    expect((await storedRequest(user_code)).status).toBe('pending');
  });

  it.each([
    ['approve after deny', 'deny', 'approve', 'access_denied'],
    ['deny after approve', 'approve', 'deny', null],
    ['approve after approve', 'approve', 'approve', null],
    ['approve after a wrong phrase', 'wrong', 'approve', 'access_denied'],
  ] as const)('a resubmitted form (%s) changes nothing', async (_case, first, second, deviceError) => {
    const { user_code, device_code, confirmation_phrase } = await startTv();
    const approval = await enterCode(user_code);
    const decoy = phraseChoices(approval.body).find((phrase) => phrase !== confirmation_phrase);
    const submit = (choice: 'approve' | 'deny' | 'wrong') =>
      choice === 'wrong' ? decide(approval.body, 'approve', decoy) : decide(approval.body, choice, confirmation_phrase);
    expect((await submit(first)).statusCode).toBe(200);
    const again = await submit(second);
    expect(again.statusCode).toBe(409);
    expect(again.body).toContain('This request was already decided and can no longer change.');
    const answer = await devicePoll(device_code);
    if (deviceError) expect(answer.json().error).toBe(deviceError);
    else expect(answer.statusCode).toBe(200);
  });

  it('a second tab that still shows the approval page cannot change a decision', async () => {
    const user = await seedUser(t);
    const firstTab = await signedInBrowser(t, user);
    const secondTab = await signedInBrowser(t, user);
    const { user_code, device_code, confirmation_phrase } = await startTv();
    const pageInFirst = await enterCode(user_code, '/activate', firstTab);
    const pageInSecond = await enterCode(user_code, '/activate', secondTab);
    expect((await decide(pageInFirst.body, 'approve', confirmation_phrase, firstTab)).statusCode).toBe(200);
    const late = await decide(pageInSecond.body, 'deny', undefined, secondTab);
    expect(late.statusCode).toBe(409);
    expect(late.body).toContain('can no longer change');
    expect((await devicePoll(device_code)).statusCode).toBe(200);
  });

  it('of racing submissions from two tabs exactly one decides', async () => {
    const { user_code } = await startTv();
    const approval = await enterCode(user_code);
    const results = await Promise.all([
      decide(approval.body, 'deny', undefined),
      decide(approval.body, 'deny', undefined),
      decide(approval.body, 'deny', undefined),
    ]);
    expect(results.map((r) => r.statusCode).sort()).toEqual([200, 409, 409]);
  });

  it('a decision after the code expired changes nothing', async () => {
    const { user_code, confirmation_phrase } = await startTv();
    const approval = await enterCode(user_code);
    t.clock.advance(t.config.deviceCodeTtl);
    const res = await decide(approval.body, 'approve', confirmation_phrase);
    expect(res.statusCode).toBe(410);
    expect(res.body).toContain('That code has expired.');
    expect((await storedRequest(user_code)).status).toBe('pending');
  });

  it('the approval form names its request by an unguessable handle, never by its sequence number', async () => {
    const first = await enterCode((await startTv()).user_code);
    const second = await enterCode((await startTv()).user_code);
    const handles = [inputValue(first.body, 'request_handle')!, inputValue(second.body, 'request_handle')!];
    for (const handle of handles) expect(handle).toMatch(/^[A-Za-z0-9_-]{22}$/);
    expect(handles[0]).not.toBe(handles[1]);
    expect(first.body).not.toContain('name="request_id"');
  });

  it('a wrong request handle is answered exactly as an unknown code, and decides nothing', async () => {
    const victim = await startTv();
    const mine = await startTv();
    const victimHandle = inputValue((await enterCode(victim.user_code)).body, 'request_handle')!;
    const victimId = (await storedRequest(victim.user_code)).request_id;
    await enterCode(mine.user_code);
    const unknown = await browser.post('/activate/decision', { user_code: 'ZXZX-ZXZX', request_handle: victimHandle, action: 'deny' });
    for (const handle of [victimHandle, victimId, '0', 'x'.repeat(22)]) {
      const res = await browser.post('/activate/decision', { user_code: mine.user_code, request_handle: handle, action: 'deny' });
      expect(res.statusCode).toBe(unknown.statusCode);
      expect(res.body.replace(new RegExp(mine.user_code, 'g'), 'CODE')).toBe(unknown.body.replace(/ZXZX-ZXZX/g, 'CODE'));
    }
    expect(unknown.statusCode).toBe(400);
    expect(unknown.body).toContain('That code was not found.');
    expect((await storedRequest(victim.user_code)).status).toBe('pending');
    expect((await storedRequest(mine.user_code)).status).toBe('pending');
  });

  it('a TV request cannot be decided through /activate/bot/decision', async () => {
    const { user_code } = await startTv();
    const approval = await enterCode(user_code);
    const res = await decide(approval.body, 'deny', undefined, browser, '/activate/bot');
    expect(res.statusCode).toBe(400);
    expect(res.body).toContain('That code belongs to a device, not a bot.');
    expect((await storedRequest(user_code)).status).toBe('pending');
  });

  it('a signed-out decision goes to sign-in and decides nothing', async () => {
    const { user_code } = await startTv();
    const approval = await enterCode(user_code);
    const anonymous = new Browser(t);
    await anonymous.get('/signin');
    const res = await decide(approval.body, 'deny', undefined, anonymous);
    expect(res.statusCode).toBe(303);
    expect(res.headers.location).toBe(`/signin?return_to=${encodeURIComponent(`/activate?user_code=${user_code}`)}`);
    expect((await storedRequest(user_code)).status).toBe('pending');
  });
});

describe('CSRF', () => {
  it.each([
    ['without a CSRF token', null],
    ['with a wrong CSRF token', 'x'.repeat(43)],
    ['with an empty CSRF token', ''],
  ])('a decision posted %s is refused with 403 and the request stays pending', async (_case, csrfToken) => {
    const { user_code, device_code, confirmation_phrase } = await startTv();
    const approval = await enterCode(user_code);
    const fields = { user_code, request_handle: inputValue(approval.body, 'request_handle'), action: 'approve', phrase: confirmation_phrase };
    const res = await browser.post('/activate/decision', fields, { csrfToken });
    expect(res.statusCode).toBe(403);
    expect(res.body).toContain('Nothing was changed');
    expect((await storedRequest(user_code)).status).toBe('pending');
    expect((await devicePoll(device_code)).json().error).toBe('authorization_pending');
  });

  it("another session's CSRF token is refused", async () => {
    const other = await signedInBrowser(t, await seedUser(t));
    await other.get('/activate');
    const { user_code } = await startTv();
    const approval = await enterCode(user_code);
    const res = await browser.post(
      '/activate/decision',
      { user_code, request_handle: inputValue(approval.body, 'request_handle'), action: 'deny' },
      { csrfToken: other.csrfToken },
    );
    expect(res.statusCode).toBe(403);
    expect((await storedRequest(user_code)).status).toBe('pending');
  });

  it('the code step refuses a POST without a CSRF token', async () => {
    const { user_code } = await startTv();
    const res = await browser.post('/activate', { user_code }, { csrfToken: null });
    expect(res.statusCode).toBe(403);
    expect(phraseChoices(res.body)).toHaveLength(0);
  });

  it('a repeated CSRF token field is refused', async () => {
    const res = await t.app.inject({
      method: 'POST',
      url: '/activate',
      headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: `da_session=${browser.cookies.get('da_session')}` },
      payload: `csrf_token=${browser.csrfToken}&csrf_token=${browser.csrfToken}&user_code=BCDF-GHJK`,
    });
    expect(res.statusCode).toBe(403);
  });
});
