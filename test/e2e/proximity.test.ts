import type { BrowserContextOptions, Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import {
  approverFrom,
  devicePoll,
  expectHeading,
  expectTokens,
  expectVisible,
  pickPhraseAndPress,
  requestCodeFrom,
  screenshot,
  scrollWidth,
  seedTvAndBot,
  submitCode,
  useE2e,
} from '../helpers/chromium.js';

/**
 * Issue 20 §5: the approval page's three cases in Chromium, at desktop width and at 360 px.
 * Addresses come from X-Forwarded-For with TRUST_PROXY set to loopback, and are real public ones
 * the shipped data knows: Deutsche Telekom (DE), Comcast (US), Hetzner (DE, a hosting network).
 */

const suite = useE2e(seedTvAndBot, { TRUST_PROXY: '127.0.0.1' });

const TELEKOM_HOME = '79.192.0.1';
const TELEKOM_PHONE = '79.192.0.2';
const COMCAST = '73.0.0.1';
const HETZNER = '88.198.0.1';
const PHONE = { viewport: { width: 360, height: 740 }, isMobile: true, hasTouch: true } as const;

const requestFrom = (address: string) => requestCodeFrom(suite.e2e, suite.tv.clientId, address);

/** A browser whose every request arrives through the (trusted) proxy as from `address`, at the code step. */
async function approverAt(address: string, name: string, options: BrowserContextOptions = {}): Promise<Page> {
  const page = await approverFrom(suite.e2e, address, options);
  await screenshot(page, `${name}-1-code`);
  return page;
}

describe('the approval page says where a request came from', () => {
  // Issue 27 §1: only the same public address is "your network"; the same AS alone is not.
  it('the same network: "appears to be on your network", no warning, approve', async () => {
    const started = await requestFrom(TELEKOM_HOME);
    const page = await approverAt(TELEKOM_HOME, 'proximity-same-network');
    await submitCode(page, started.user_code);
    await expectVisible(page.getByText('This device appears to be on your network.'));
    await expectVisible(page.getByText('on Deutsche Telekom AG', { exact: false }));
    expect(await page.getByRole('checkbox').count()).toBe(0);
    await screenshot(page, 'proximity-same-network-2-approval');
    await pickPhraseAndPress(page, started.confirmation_phrase, 'Approve');
    await expectHeading(page, 'Device connected');
    await expectTokens(await devicePoll(suite.e2e, suite.tv.clientId, started));
  });

  it('another country, on a 360 px phone: a warning, and Approve counts only with the box ticked; nothing scrolls sideways', async () => {
    const started = await requestFrom(COMCAST);
    const page = await approverAt(TELEKOM_PHONE, 'proximity-country', PHONE);
    await submitCode(page, started.user_code);
    const warning = page.locator('#phishing-warning');
    await expectVisible(warning);
    expect(await warning.innerText()).toContain('If someone sent you this code or link, press Deny.');
    const box = page.getByRole('checkbox', { name: 'I am setting up a device that is in front of me' });
    expect(await box.isChecked()).toBe(false);
    expect(await scrollWidth(page)).toBeLessThanOrEqual(PHONE.viewport.width);
    await screenshot(page, 'proximity-country-2-warning');
    await pickPhraseAndPress(page, started.confirmation_phrase, 'Approve');
    await expectVisible(page.getByRole('alert').getByText('to approve, or press Deny'));
    await screenshot(page, 'proximity-country-3-step-missing');
    expect((await devicePoll(suite.e2e, suite.tv.clientId, started)).json().error).toBe('authorization_pending');
    await page.getByRole('radio', { name: started.confirmation_phrase, exact: true }).check();
    await box.check();
    await page.getByRole('button', { name: 'Approve', exact: true }).click();
    await expectHeading(page, 'Device connected');
    await screenshot(page, 'proximity-country-4-connected');
    await expectTokens(await devicePoll(suite.e2e, suite.tv.clientId, started));
  });

  it('a hosting network: the warning names it, and Deny is as easy to press as Approve', async () => {
    const started = await requestFrom(HETZNER);
    const page = await approverAt(TELEKOM_PHONE, 'proximity-hosting');
    await submitCode(page, started.user_code);
    await expectVisible(page.getByText('This request came from a hosting provider’s network, not from a home or office.'));
    const approve = await page.getByRole('button', { name: 'Approve', exact: true }).boundingBox();
    const deny = await page.getByRole('button', { name: 'Deny', exact: true }).boundingBox();
    expect(Math.abs(approve!.height - deny!.height)).toBeLessThanOrEqual(1);
    await screenshot(page, 'proximity-hosting-2-warning');
    await page.getByRole('button', { name: 'Deny', exact: true }).click();
    await expectHeading(page, 'Request denied');
    expect((await devicePoll(suite.e2e, suite.tv.clientId, started)).json().error).toBe('access_denied');
  });
});
