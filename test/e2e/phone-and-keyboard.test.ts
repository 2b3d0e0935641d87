import type { Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { seedClient, seedUser } from '../helpers/app.js';
import {
  devicePoll,
  expectHeading,
  expectTokens,
  expectVisible,
  openPage,
  pickPhraseAndPress,
  screenshot,
  scrollWidth,
  signInHere,
  submitCode,
  useE2e,
} from '../helpers/chromium.js';
import { startDeviceFlow } from '../helpers/device.js';

// An app name in one long word: nothing may push the page wider than the phone.
const suite = useE2e(async (t) => ({ tv: await seedClient(t, { kind: 'tv', name: 'TheLivingRoomTelevisionOnTheSecondFloorNextToTheWindow' }) }));

/** Platform fields at their longest, without spaces: the worst case for a narrow screen. */
const longPlatform = () => ({
  platform_name: 'K'.repeat(64),
  platform_description: `${'Kitchen-television-by-the-fridge-'.repeat(7)}end`,
  platform_icon: suite.e2e.iconServer.url(`/tv.png?${'size=48&'.repeat(20)}`),
});

describe('on a 360 px wide phone', () => {
  const PHONE = { viewport: { width: 360, height: 740 }, isMobile: true, hasTouch: true, deviceScaleFactor: 2 };

  async function expectNoSideways(page: Page, step: string) {
    await screenshot(page, `phone-${step}`);
    expect(await scrollWidth(page), `${step} scrolls sideways`).toBeLessThanOrEqual(PHONE.viewport.width);
  }

  it('signs in, enters the code, picks the phrase and approves without ever scrolling sideways', async () => {
    const { page } = await openPage(suite.e2e, PHONE);
    const started = await startDeviceFlow(suite.e2e.t, suite.tv.clientId, longPlatform());
    await suite.e2e.t.deps.platformIcons.settled();
    await page.goto(`${suite.e2e.origin}/activate`);
    await expectNoSideways(page, '1-signin');
    await signInHere(page, await seedUser(suite.e2e.t));
    await expectNoSideways(page, '2-code');
    await submitCode(page, 'BCDF-GHJK');
    await expectVisible(page.getByRole('alert'));
    await expectNoSideways(page, '2-code-unknown');
    await submitCode(page, started.user_code);
    await expectVisible(page.getByRole('radio', { name: started.confirmation_phrase, exact: true }));
    expect(await page.getByText('Unverified', { exact: true }).count()).toBe(3);
    await expectNoSideways(page, '3-approval');
    await pickPhraseAndPress(page, started.confirmation_phrase, 'Approve');
    await expectVisible(page.getByRole('status'));
    await expectNoSideways(page, '4-connected');
    await expectTokens(await devicePoll(suite.e2e, suite.tv.clientId, started));
  });
});

describe('by keyboard alone', () => {
  /** What has the focus, and whether it shows: a ring (outline) or a glow (box-shadow). */
  function focused(page: Page) {
    return page.evaluate(() => {
      const element = document.activeElement as HTMLInputElement | null;
      if (!element || element === document.body) return null;
      const style = getComputedStyle(element);
      const ring = style.outlineStyle !== 'none' && parseFloat(style.outlineWidth) > 0;
      return {
        tag: element.tagName.toLowerCase(),
        type: element.type ?? null,
        name: element.getAttribute('name'),
        value: element.value ?? null,
        text: element.textContent?.trim() ?? '',
        visible: ring || style.boxShadow !== 'none',
      };
    });
  }

  /** Presses `key` until `wanted` holds for the focused element; at most `limit` presses, each focus visible. */
  async function pressUntil(page: Page, key: string, wanted: (f: NonNullable<Awaited<ReturnType<typeof focused>>>) => boolean, limit = 15) {
    for (let presses = 0; presses < limit; presses++) {
      await page.keyboard.press(key);
      const now = await focused(page);
      if (now) expect(now.visible, `focus on <${now.tag} ${now.name ?? ''}> is not visible`).toBe(true);
      if (now && wanted(now)) return now;
    }
    throw new Error(`pressing ${key} ${limit} times never reached the element`);
  }

  it('signs in, enters the code, picks the phrase and approves with Tab, typing, Space and Enter, focus always visible', async () => {
    const { page } = await openPage(suite.e2e);
    const started = await startDeviceFlow(suite.e2e.t, suite.tv.clientId);
    const user = await seedUser(suite.e2e.t);
    await page.goto(`${suite.e2e.origin}/activate`);
    await expectHeading(page, 'Sign in');

    // The email field has the focus from the start.
    expect(await focused(page)).toMatchObject({ name: 'email', visible: true });
    await page.keyboard.type(user.email);
    await pressUntil(page, 'Tab', (f) => f.name === 'password');
    await page.keyboard.type(user.password);
    await pressUntil(page, 'Tab', (f) => f.tag === 'button' && f.text === 'Sign in');
    await pressUntil(page, 'Shift+Tab', (f) => f.name === 'password');
    await screenshot(page, 'keyboard-1-signin');
    await Promise.all([page.waitForURL((url) => url.pathname === '/activate'), page.keyboard.press('Enter')]);

    // The code field has the focus on arrival.
    await expectHeading(page, 'Connect a device');
    expect(await focused(page)).toMatchObject({ name: 'user_code', visible: true });
    await page.keyboard.type(started.user_code.toLowerCase());
    await screenshot(page, 'keyboard-2-code');
    await page.keyboard.press('Enter');
    await expectVisible(page.getByRole('group', { name: 'Which phrase does your device show?' }));

    // Tab reaches the first phrase; the arrow keys move within the group; Space picks.
    const first = await pressUntil(page, 'Tab', (f) => f.name === 'phrase');
    if (first.value !== started.confirmation_phrase) await pressUntil(page, 'ArrowDown', (f) => f.value === started.confirmation_phrase, 2);
    expect(await focused(page)).toMatchObject({ name: 'phrase', value: started.confirmation_phrase });
    await page.keyboard.press('Space');
    expect(await page.getByRole('radio', { name: started.confirmation_phrase, exact: true }).isChecked()).toBe(true);
    await pressUntil(page, 'Tab', (f) => f.tag === 'button' && f.text === 'Approve');
    await screenshot(page, 'keyboard-3-approval');
    await page.keyboard.press('Enter');
    await expectVisible(page.getByRole('status').getByText('is now connected to your account.'));
    await screenshot(page, 'keyboard-4-connected');
    await expectTokens(await devicePoll(suite.e2e, suite.tv.clientId, started));
  });
});
