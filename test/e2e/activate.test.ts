import type { Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import type { DeviceAuthorizationResponse } from '../../src/oauth/device/authorization.js';
import { basicAuth, seedUser } from '../helpers/app.js';
import {
  devicePoll,
  expectHeading,
  expectTokens,
  expectVisible,
  openPage,
  pagePath,
  phraseLabels,
  pickPhraseAndPress,
  screenshot,
  seedTvAndBot,
  signInHere,
  submitCode,
  useE2e,
} from '../helpers/chromium.js';
import { startDeviceFlow } from '../helpers/device.js';

const suite = useE2e(seedTvAndBot);

const PLATFORM = {
  platform_name: 'Kitchen TV',
  platform_description: 'A 55-inch television by the fridge',
};

const startTv = (extra: Record<string, string> = {}) => startDeviceFlow(suite.e2e.t, suite.tv.clientId, extra);
const startBot = () => startDeviceFlow(suite.e2e.t, suite.bot.clientId, {}, { authorization: basicAuth(suite.bot.clientId, suite.bot.clientSecret!) });
const botPoll = (started: DeviceAuthorizationResponse) =>
  devicePoll(suite.e2e, undefined, started, { authorization: basicAuth(suite.bot.clientId, suite.bot.clientSecret!) });

/** A fresh browser of a new user, at the code step of `path` after signing in; screenshots prefixed `name`. */
async function signedInAtCodeStep(name: string, path = '/activate') {
  const opened = await openPage(suite.e2e);
  const { page } = opened;
  const user = await seedUser(suite.e2e.t);
  await page.goto(`${suite.e2e.origin}${path}`);
  expect(pagePath(page)).toBe(`/signin?return_to=${encodeURIComponent(path)}`);
  await screenshot(page, `${name}-1-signin`);
  await signInHere(page, user);
  expect(pagePath(page)).toBe(path);
  await expectVisible(page.getByLabel('Code'));
  await screenshot(page, `${name}-2-code`);
  return { ...opened, user };
}

/** Types the code and waits for the approval step, checking it shows the three phrases as radios. */
async function reachApproval(page: Page, started: DeviceAuthorizationResponse, name: string, noun: 'device' | 'bot' = 'device') {
  await submitCode(page, started.user_code);
  await expectVisible(page.getByRole('group', { name: `Which phrase does your ${noun} show?` }));
  const phrases = await phraseLabels(page);
  expect(phrases).toHaveLength(3);
  expect(phrases).toContain(started.confirmation_phrase);
  await screenshot(page, `${name}-3-approval`);
  return phrases;
}

describe('a person at the device page', () => {
  it('signs in, enters the code, picks the phrase and approves: the device gets tokens', async () => {
    const { page, requests } = await signedInAtCodeStep('approve');
    const iconUrl = suite.e2e.iconServer.url('/tv.png');
    const started = await startTv({ ...PLATFORM, platform_icon: iconUrl });
    await suite.e2e.t.deps.platformIcons.settled();
    const phrases = await reachApproval(page, started, 'approve');

    // The app name, the phrase choices and each Unverified mark are on screen, and stand out.
    const appName = page.locator('#app-name');
    await expectVisible(appName);
    expect(await appName.innerText()).toBe('Living Room TV');
    for (const phrase of phrases) await expectVisible(page.getByRole('radio', { name: phrase, exact: true }));
    await expectVisible(page.locator('dd', { hasText: PLATFORM.platform_name }).getByText('Unverified', { exact: true }));
    await expectVisible(page.locator('dd', { hasText: PLATFORM.platform_description }).getByText('Unverified', { exact: true }));
    const icon = page.getByRole('img', { name: 'Icon sent by the device' });
    await expectVisible(icon);
    await expectVisible(page.locator('dd', { has: icon }).getByText('Unverified', { exact: true }));
    expect(await page.getByText('Unverified', { exact: true }).count()).toBe(3);
    const sizes = await page.evaluate(() => {
      const px = (selector: string) => parseFloat(getComputedStyle(document.querySelector(selector)!).fontSize);
      return { body: px('body'), appName: px('#app-name'), phrase: px('label.phrase') };
    });
    expect(sizes.appName).toBeGreaterThan(sizes.body);
    expect(sizes.phrase).toBeGreaterThan(sizes.body);
    // The icon really loaded, from our own origin (the page's CSP allows no other).
    expect(await icon.evaluate((img: HTMLImageElement) => img.complete && img.naturalWidth > 0)).toBe(true);
    expect(new URL(await icon.evaluate((img: HTMLImageElement) => img.currentSrc)).origin).toBe(suite.e2e.origin);

    await pickPhraseAndPress(page, started.confirmation_phrase, 'Approve');
    await expectVisible(page.getByRole('status').getByText('is now connected to your account. You can close this window and return to your device.'));
    await screenshot(page, 'approve-4-connected');
    await expectTokens(await devicePoll(suite.e2e, suite.tv.clientId, started));

    // The page made no request to the device's host, nor to any other origin: the device's host
    // heard from the server alone, once, never with the user's cookies or browser.
    const foreign = requests.filter((request) => new URL(request.url()).origin !== suite.e2e.origin);
    expect(foreign.map((request) => request.url())).toEqual([]);
    expect(requests.some((request) => new URL(request.url()).pathname.startsWith('/icons/'))).toBe(true);
    const heard = suite.e2e.iconServer.requests.filter((request) => request.path === '/tv.png');
    expect(heard).toHaveLength(1);
    expect(heard[0]?.headers['user-agent']).toMatch(/^device-auth-icon-fetcher\//);
    expect(heard[0]?.headers.cookie).toBeUndefined();
    expect(heard[0]?.headers.referer).toBeUndefined();
  });

  it('picks a wrong phrase: the request is cancelled and the device hears access_denied', async () => {
    const { page } = await signedInAtCodeStep('wrong-phrase');
    const started = await startTv();
    const phrases = await reachApproval(page, started, 'wrong-phrase');
    const decoy = phrases.find((phrase) => phrase !== started.confirmation_phrase)!;
    await pickPhraseAndPress(page, decoy, 'Approve');
    await expectVisible(page.getByRole('status').getByText('That phrase does not match the one on your device'));
    await screenshot(page, 'wrong-phrase-4-cancelled');
    const answer = await devicePoll(suite.e2e, suite.tv.clientId, started);
    expect(answer.json()).toMatchObject({ error: 'access_denied' });
  });

  it('denies: "Request denied." and the device hears access_denied', async () => {
    const { page } = await signedInAtCodeStep('deny');
    const started = await startTv();
    await reachApproval(page, started, 'deny');
    await page.getByRole('button', { name: 'Deny', exact: true }).click();
    await expectVisible(page.getByRole('status').getByText('Nothing was connected'));
    await screenshot(page, 'deny-4-denied');
    const answer = await devicePoll(suite.e2e, suite.tv.clientId, started);
    expect(answer.json()).toMatchObject({ error: 'access_denied' });
  });

  it('opens verification_uri_complete: after signing in the code is already filled in', async () => {
    const started = await startTv();
    expect(started.verification_uri_complete.startsWith(`${suite.e2e.origin}/activate?`)).toBe(true);
    const { page } = await openPage(suite.e2e);
    await page.goto(started.verification_uri_complete);
    await expectHeading(page, 'Sign in');
    await screenshot(page, 'prefilled-1-signin');
    await signInHere(page, await seedUser(suite.e2e.t));
    expect(pagePath(page)).toBe(`/activate?user_code=${started.user_code}`);
    expect(await page.getByLabel('Code').inputValue()).toBe(started.user_code);
    await screenshot(page, 'prefilled-2-code');
    await page.getByRole('button', { name: 'Continue' }).click();
    await pickPhraseAndPress(page, started.confirmation_phrase, 'Approve');
    await expectVisible(page.getByRole('status').getByText('is now connected to your account.'));
    await expectTokens(await devicePoll(suite.e2e, suite.tv.clientId, started));
  });
});

describe('a person connecting a bot', () => {
  it('approves a bot on /activate/bot: the bot gets tokens', async () => {
    const { page } = await signedInAtCodeStep('bot', '/activate/bot');
    await expectHeading(page, 'Connect a bot');
    const started = await startBot();
    await reachApproval(page, started, 'bot', 'bot');
    expect(await page.locator('#app-name').innerText()).toBe('Helper Bot');
    await pickPhraseAndPress(page, started.confirmation_phrase, 'Approve');
    await expectVisible(page.getByRole('status').getByText('is now connected to your account. You can close this window and return to your bot.'));
    await screenshot(page, 'bot-4-connected');
    await expectTokens(await botPoll(started));
  });

  it('enters a bot code on /activate: told it is the wrong page, and the link leads to /activate/bot with the code', async () => {
    const { page } = await signedInAtCodeStep('bot-wrong-page');
    const started = await startBot();
    await submitCode(page, started.user_code);
    await expectVisible(page.getByRole('alert').getByText('That code belongs to a bot.'));
    expect(await page.getByRole('radio').count()).toBe(0);
    await screenshot(page, 'bot-wrong-page-3-message');
    await page.getByRole('alert').getByRole('link', { name: 'Connect a bot' }).click();
    await expectHeading(page, 'Connect a bot');
    expect(pagePath(page)).toBe(`/activate/bot?user_code=${started.user_code}`);
    expect(await page.getByLabel('Code').inputValue()).toBe(started.user_code);
    await page.getByRole('button', { name: 'Continue' }).click();
    await pickPhraseAndPress(page, started.confirmation_phrase, 'Approve');
    await expectVisible(page.getByRole('status').getByText('is now connected to your account. You can close this window and return to your bot.'));
    await expectTokens(await botPoll(started));
  });
});
