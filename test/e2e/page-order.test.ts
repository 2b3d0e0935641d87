import type { Locator, Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { basicAuth, seedUser } from '../helpers/app.js';
import { decide, startDeviceFlow } from '../helpers/device.js';
import {
  devicePoll,
  expectHeading,
  expectTokens,
  expectVisible,
  openPage,
  pickPhraseAndPress,
  requestCodeFrom,
  screenshot,
  scrollWidth,
  seedTvAndBot,
  signInHere,
  submitCode,
  useE2e,
} from '../helpers/chromium.js';

/**
 * Issue 27 §4-§6: every page a TV owner reads, at 360 px and at 1280 px, screenshotted
 * (test-artifacts/screenshots/order-*.png) and checked for the order a person decides in, by
 * where each part is drawn: the app's name, where the request came from (and the warning), the
 * phrase, the buttons, and, under a warning, the device's own words last. Addresses reach the
 * server through the trusted proxy (TRUST_PROXY) and are real public ones the shipped data knows:
 * Deutsche Telekom (DE) and Comcast (US).
 */

const suite = useE2e(seedTvAndBot, { TRUST_PROXY: '127.0.0.1' });

const TELEKOM = '79.192.0.1';
const COMCAST = '73.0.0.1';
const WIDTHS = [
  { name: 'phone', width: 360, height: 740 },
  { name: 'desktop', width: 1280, height: 800 },
] as const;

/** What a phisher's device says about itself, to answer the warning in the page's own voice. */
const CLAIM = {
  platform_name: 'IT-managed Teams Room (verified)',
  platform_description: 'the location notice above is expected, tick the box and pick the phrase IT gave you',
};

/** The accent (primary) colour of style.css, as the browser computes it. */
const PRIMARY = 'rgb(11, 87, 208)';

/** A TV's request, with the claim, that reaches the server through the proxy as from `address`. */
const requestWithClaimFrom = (address: string) => requestCodeFrom(suite.e2e, suite.tv.clientId, address, {}, CLAIM);

/** A browser page whose requests arrive through the proxy as from `address`, signed in as `user` at `path`. */
async function signedInAt(address: string, user: { email: string; password: string }, path = '/activate'): Promise<Page> {
  const { page } = await openPage(suite.e2e, { viewport: { width: 1280, height: 800 }, extraHTTPHeaders: { 'X-Forwarded-For': address } });
  await page.goto(`${suite.e2e.origin}${path}`);
  await signInHere(page, user);
  return page;
}

/** At each width: a screenshot, nothing scrolls sideways, and `check` holds. */
async function atEveryWidth(page: Page, name: string, check: (width: number) => Promise<void> = async () => {}): Promise<void> {
  for (const { name: size, width, height } of WIDTHS) {
    await page.setViewportSize({ width, height });
    await screenshot(page, `order-${name}-${size}`);
    expect(await scrollWidth(page), `${name} scrolls sideways at ${width} px`).toBeLessThanOrEqual(width);
    await check(width);
  }
}

async function top(locator: Locator, what: string): Promise<number> {
  const box = await locator.boundingBox();
  if (!box) throw new Error(`${what} is not drawn`);
  return box.y;
}

/** Each part is drawn below the one before it. */
async function expectDrawnInOrder(parts: [string, Locator][], width: number): Promise<void> {
  const tops: number[] = [];
  for (const [what, locator] of parts) tops.push(await top(locator, what));
  for (let i = 1; i < parts.length; i++) {
    expect(tops[i], `${parts[i]![0]} below ${parts[i - 1]![0]} at ${width} px`).toBeGreaterThan(tops[i - 1]!);
  }
}

const background = (locator: Locator) => locator.evaluate((element) => getComputedStyle(element).backgroundColor);

function approvalParts(page: Page) {
  return {
    appName: page.locator('#app-name'),
    origin: page.locator('#request-origin'),
    warning: page.locator('#phishing-warning'),
    phrases: page.locator('fieldset.phrases'),
    buttons: page.locator('.actions'),
    claim: page.getByText(CLAIM.platform_name, { exact: false }),
    approve: page.getByRole('button', { name: 'Approve', exact: true }),
    deny: page.getByRole('button', { name: 'Deny', exact: true }),
  };
}

describe('the pages a TV owner reads, at 360 px and on a desktop', () => {
  it('code entry, then an approval without a warning: the app, the one-line origin, the phrase, the buttons; Approve primary; then the result', async () => {
    const user = await seedUser(suite.e2e.t);
    const started = await requestWithClaimFrom(TELEKOM);
    const page = await signedInAt(TELEKOM, user);
    await expectHeading(page, 'Connect a device');
    await atEveryWidth(page, 'code-entry', async (width) => {
      await expectDrawnInOrder(
        [
          ['the code field', page.getByLabel('Code')],
          ['Continue', page.getByRole('button', { name: 'Continue' })],
        ],
        width,
      );
    });
    await submitCode(page, started.user_code);
    const parts = approvalParts(page);
    await expectVisible(parts.appName);
    expect(await parts.warning.count()).toBe(0);
    await atEveryWidth(page, 'approval-plain', async (width) => {
      // No warning: the device's words describe it beside the app, marked as its own.
      await expectDrawnInOrder(
        [
          ['the app name', parts.appName],
          ["the device's claim", parts.claim],
          ['where it came from', parts.origin],
          ['the phrase', parts.phrases],
          ['the buttons', parts.buttons],
        ],
        width,
      );
      expect(await background(parts.approve)).toBe(PRIMARY);
    });
    await pickPhraseAndPress(page, started.confirmation_phrase, 'Approve');
    await expectHeading(page, 'Device connected');
    await atEveryWidth(page, 'result');
    await expectTokens(await devicePoll(suite.e2e, suite.tv.clientId, started));
  });

  it("an approval under a warning: the device's own words only after the buttons, Deny primary and first, at both widths", async () => {
    const user = await seedUser(suite.e2e.t);
    const flow = await requestWithClaimFrom(COMCAST);
    const page = await signedInAt(TELEKOM, user);
    await submitCode(page, flow.user_code);
    const parts = approvalParts(page);
    await expectVisible(parts.warning);
    expect(await parts.claim.count()).toBe(1);
    await atEveryWidth(page, 'approval-warning', async (width) => {
      await expectDrawnInOrder(
        [
          ['the app name', parts.appName],
          ['where it came from', parts.origin],
          ['the warning', parts.warning],
          ['the phrase', parts.phrases],
          ['the buttons', parts.buttons],
          ["the device's claim", parts.claim],
        ],
        width,
      );
      expect(await background(parts.deny)).toBe(PRIMARY);
      expect(await background(parts.approve)).toBe('rgb(255, 255, 255)');
      const deny = (await parts.deny.boundingBox())!;
      const approve = (await parts.approve.boundingBox())!;
      // Deny comes first: to the left on one line, or above when the line wraps.
      expect(deny.y < approve.y || (deny.y === approve.y && deny.x < approve.x)).toBe(true);
    });
    await page.getByRole('button', { name: 'Deny', exact: true }).click();
    await expectHeading(page, 'Request denied');
    expect((await devicePoll(suite.e2e, suite.tv.clientId, flow)).json().error).toBe('access_denied');
  });

  it("a bot's approval under a warning speaks of the bot, in the same order", async () => {
    const user = await seedUser(suite.e2e.t);
    const started = await requestCodeFrom(suite.e2e, suite.bot.clientId, COMCAST, { authorization: basicAuth(suite.bot.clientId, suite.bot.clientSecret!) });
    const page = await signedInAt(TELEKOM, user, '/activate/bot');
    await expectHeading(page, 'Connect a bot');
    await submitCode(page, started.user_code);
    const parts = approvalParts(page);
    await expectVisible(page.getByRole('checkbox', { name: 'I started this myself, on my own bot' }));
    expect(await page.locator('main').innerText()).not.toMatch(/in front of|device/i);
    await atEveryWidth(page, 'approval-bot', async (width) => {
      await expectDrawnInOrder(
        [
          ['the app name', parts.appName],
          ['where it came from', parts.origin],
          ['the warning', parts.warning],
          ['the phrase', parts.phrases],
          ['the buttons', parts.buttons],
        ],
        width,
      );
      expect(await background(parts.deny)).toBe(PRIMARY);
    });
  });

  it('Devices and Connected apps: a waiting approval is waiting (not "no devices"), can be cancelled, and both pages agree', async () => {
    const user = await seedUser(suite.e2e.t);
    const signedIn = await startDeviceFlow(suite.e2e.t, suite.tv.clientId, { platform_name: 'Kitchen TV' });
    expect(await decide(suite.e2e.t, signedIn.user_code, user.userId, 'approve')).toBe('approved');
    await expectTokens(await devicePoll(suite.e2e, suite.tv.clientId, signedIn));
    const waiting = await startDeviceFlow(suite.e2e.t, suite.tv.clientId, { platform_name: 'Bedroom TV' });
    expect(await decide(suite.e2e.t, waiting.user_code, user.userId, 'approve')).toBe('approved');

    const page = await signedInAt(TELEKOM, user, '/account/devices');
    await expectHeading(page, 'Devices');
    await expectVisible(page.getByText('Waiting for the device', { exact: true }));
    expect(await page.getByText('No devices are signed in.').count()).toBe(0);
    await expectVisible(page.getByText('less than a minute ago').first());
    expect(await page.locator('main').innerText()).not.toContain('UTC');
    await atEveryWidth(page, 'devices', async (width) => {
      const footer = page.locator('footer.page-footer');
      expect(await footer.count()).toBe(1);
      await expectDrawnInOrder(
        [
          ['the heading', page.getByRole('heading', { level: 1 })],
          ['the waiting device', page.locator('li.waiting')],
          ['the credits', footer],
        ],
        width,
      );
    });

    await page.goto(`${suite.e2e.origin}/account/apps`);
    await expectHeading(page, 'Connected apps');
    await expectVisible(page.getByText('1 device · 1 waiting to sign in', { exact: false }));
    await atEveryWidth(page, 'apps');

    await page.goto(`${suite.e2e.origin}/account/devices`);
    await page.getByRole('button', { name: 'Cancel approval Living Room TV' }).click();
    await expectVisible(page.getByText('Cancelled the approval of Living Room TV: it will not be signed in.'));
    expect(await page.locator('li.waiting').count()).toBe(0);
    await atEveryWidth(page, 'devices-cancelled');
    expect((await devicePoll(suite.e2e, suite.tv.clientId, waiting)).json().error).toBe('access_denied');
  });

  it('the header: "Not you?" signs out and brings the next person back to the same code', async () => {
    const user = await seedUser(suite.e2e.t);
    const started = await requestCodeFrom(suite.e2e, suite.tv.clientId, TELEKOM);
    const page = await signedInAt(TELEKOM, user, `/activate?user_code=${started.user_code}`);
    await page.setViewportSize({ width: 360, height: 740 });
    const account = page.locator('.account');
    await expectVisible(account.getByText(user.email));
    // "Sign out" sits with the account name, on the same line or just under it at 360 px.
    const name = (await account.locator('.signed-in-as').boundingBox())!;
    const signOut = (await account.getByRole('button', { name: 'Sign out' }).boundingBox())!;
    expect(signOut.y - (name.y + name.height)).toBeLessThan(24);
    await screenshot(page, 'order-header-phone');
    await Promise.all([page.waitForURL((url) => url.pathname === '/signin'), account.getByRole('button', { name: 'Not you?' }).click()]);
    await signInHere(page, await seedUser(suite.e2e.t));
    await expectHeading(page, 'Connect a device');
    expect(await page.getByLabel('Code').inputValue()).toBe(started.user_code);
  });
});
