import type { Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { basicAuth, seedUser } from '../helpers/app.js';
import {
  devicePoll,
  expectHeading,
  expectTokens,
  expectVisible,
  openPage,
  requestCodeFrom,
  screenshot,
  scrollWidth,
  seedTvAndBot,
  useE2e,
} from '../helpers/chromium.js';

/**
 * Issue 20 §5: the second language in Chromium. The browser's own language setting (its
 * Accept-Language) picks German; a person signs in, enters the code, sees the warning for a
 * request from another country, ticks the extra step and approves, all in German, at desktop
 * width and at 360 px.
 */

const suite = useE2e(seedTvAndBot, { TRUST_PROXY: '127.0.0.1' });

const TELEKOM_PHONE = '79.192.0.2';
const COMCAST = '73.0.0.1';
const PHONE = { viewport: { width: 360, height: 740 }, isMobile: true, hasTouch: true } as const;

const botAuth = () => ({ authorization: basicAuth(suite.bot.clientId, suite.bot.clientSecret!) });

const requestFrom = (clientId: string, address: string, headers: Record<string, string> = {}) => requestCodeFrom(suite.e2e, clientId, address, headers);

/** A German browser at the sign-in page of `path`, signing in there as a person would. */
async function germanSignedIn(path: string, name: string, options: object = {}): Promise<Page> {
  const { page } = await openPage(suite.e2e, { locale: 'de-DE', extraHTTPHeaders: { 'X-Forwarded-For': TELEKOM_PHONE }, ...options });
  await page.goto(`${suite.e2e.origin}${path}`);
  await expectHeading(page, 'Anmelden');
  expect(await page.evaluate(() => document.documentElement.lang)).toBe('de');
  await screenshot(page, `${name}-1-signin`);
  const user = await seedUser(suite.e2e.t);
  await page.getByLabel('E-Mail').fill(user.email);
  await page.getByLabel('Passwort').fill(user.password);
  await Promise.all([page.waitForURL((url) => url.pathname !== '/signin'), page.getByRole('button', { name: 'Anmelden' }).click()]);
  return page;
}

describe('the pages in German, as the browser asks', () => {
  it('a request from another country: the warning, the extra step and the result, all in German', async () => {
    const started = await requestFrom(suite.tv.clientId, COMCAST);
    const page = await germanSignedIn('/activate', 'german-country');
    await expectHeading(page, 'Gerät verbinden');
    await page.getByLabel('Code').fill(started.user_code);
    await screenshot(page, 'german-country-2-code');
    await page.getByRole('button', { name: 'Weiter' }).click();

    const warning = page.locator('#phishing-warning');
    await expectVisible(warning);
    expect(await warning.innerText()).toContain('Wenn Ihnen jemand diesen Code oder Link geschickt hat, drücken Sie auf Ablehnen.');
    await expectVisible(page.getByText('aus Vereinigte Staaten', { exact: false }));
    await screenshot(page, 'german-country-3-approval');
    await page.getByRole('radio', { name: started.confirmation_phrase, exact: true }).check();
    await page.getByRole('button', { name: 'Zustimmen', exact: true }).click();
    await expectVisible(page.getByRole('alert').getByText('Kreuzen Sie „Ich richte ein Gerät ein, das vor mir steht“ an'));
    expect((await devicePoll(suite.e2e, suite.tv.clientId, started)).json().error).toBe('authorization_pending');

    await page.getByRole('radio', { name: started.confirmation_phrase, exact: true }).check();
    await page.getByRole('checkbox', { name: 'Ich richte ein Gerät ein, das vor mir steht' }).check();
    await page.getByRole('button', { name: 'Zustimmen', exact: true }).click();
    await expectHeading(page, 'Gerät verbunden');
    await expectVisible(page.getByText('Sie können dieses Fenster schließen', { exact: false }));
    await screenshot(page, 'german-country-4-connected');
    await expectTokens(await devicePoll(suite.e2e, suite.tv.clientId, started));

    await page.getByRole('link', { name: 'Geräte', exact: true }).click();
    await expectHeading(page, 'Geräte');
    await expectVisible(page.getByText('Fernseher oder Geräte-App'));
    await screenshot(page, 'german-devices');
  });

  it('a bot on a 360 px phone: bot wording in German, nothing scrolls sideways', async () => {
    const started = await requestFrom(suite.bot.clientId, TELEKOM_PHONE, botAuth());
    const page = await germanSignedIn('/activate/bot', 'german-bot-phone', PHONE);
    await expectHeading(page, 'Bot verbinden');
    await page.getByLabel('Code').fill(started.user_code);
    await page.getByRole('button', { name: 'Weiter' }).click();
    await expectVisible(page.getByText('Dieser Bot scheint in Ihrem Netzwerk zu sein.'));
    await expectVisible(page.getByRole('group', { name: 'Welchen Satz zeigt Ihr Bot?' }));
    expect(await scrollWidth(page)).toBeLessThanOrEqual(PHONE.viewport.width);
    await screenshot(page, 'german-bot-phone-2-approval');
    await page.getByRole('radio', { name: started.confirmation_phrase, exact: true }).check();
    await page.getByRole('button', { name: 'Zustimmen', exact: true }).click();
    await expectHeading(page, 'Bot verbunden');
    expect(await scrollWidth(page)).toBeLessThanOrEqual(PHONE.viewport.width);
    await screenshot(page, 'german-bot-phone-3-connected');
    await expectTokens(await devicePoll(suite.e2e, undefined, started, botAuth()));
  });
});
