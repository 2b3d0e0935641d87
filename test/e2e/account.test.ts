import type { Page, Request } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { basicAuth, seedUser } from '../helpers/app.js';
import {
  devicePoll,
  expectHeading,
  expectTokens,
  expectVisible,
  openPage,
  scrollWidth,
  screenshot,
  seedTvAndBot,
  signInHere,
  useE2e,
} from '../helpers/chromium.js';
import { decide, startDeviceFlow } from '../helpers/device.js';

const suite = useE2e(seedTvAndBot);

/** A device of `client` signed in to the user's account (approved without the browser); its access token. */
async function connect(client: { clientId: string; clientSecret?: string | null }, userId: string, extra: Record<string, string> = {}) {
  // A confidential client authenticates with HTTP Basic; a public one names itself in the form.
  const headers: Record<string, string> = client.clientSecret ? { authorization: basicAuth(client.clientId, client.clientSecret) } : {};
  const started = await startDeviceFlow(suite.e2e.t, client.clientId, extra, headers);
  expect(await decide(suite.e2e.t, started.user_code, userId, 'approve')).toBe('approved');
  const tokens = await expectTokens(await devicePoll(suite.e2e, client.clientSecret ? undefined : client.clientId, started, headers));
  return tokens.access_token;
}

async function userinfoStatus(accessToken: string): Promise<number> {
  const res = await suite.e2e.t.app.inject({ method: 'GET', url: '/oauth/userinfo', headers: { authorization: `Bearer ${accessToken}` } });
  return res.statusCode;
}

/** Opens an account page as the user, through the sign-in it redirects to. */
async function openAccountPage(path: string, user: { email: string; password: string }, title: string) {
  const opened = await openPage(suite.e2e);
  await opened.page.goto(`${suite.e2e.origin}${path}`);
  await signInHere(opened.page, user);
  await expectHeading(opened.page, title);
  return opened;
}

/** Account pages load nothing from another host: they show no device icons. */
function expectAllLocal(requests: Request[]) {
  expect(requests.map((request) => new URL(request.url()).origin).filter((origin) => origin !== suite.e2e.origin)).toEqual([]);
}

/** The page at phone width, with a screenshot: nothing may scroll sideways. */
async function expectFitsPhone(page: Page, name: string) {
  const before = page.viewportSize();
  await page.setViewportSize({ width: 360, height: 740 });
  await screenshot(page, name);
  expect(await scrollWidth(page), `${name} scrolls sideways`).toBeLessThanOrEqual(360);
  if (before) await page.setViewportSize(before);
}

describe('Devices page', () => {
  it('signs a device out: it leaves the list and its access token stops working', async () => {
    const user = await seedUser(suite.e2e.t);
    const kitchen = await connect(suite.tv, user.userId, { platform_name: 'Kitchen TV', platform_description: 'By the fridge' });
    const bedroom = await connect(suite.tv, user.userId, { platform_name: 'Bedroom TV' });
    expect(await userinfoStatus(kitchen)).toBe(200);

    const { page, requests } = await openAccountPage('/account/devices', user, 'Devices');
    const kitchenRow = page.getByRole('listitem').filter({ hasText: 'Kitchen TV' });
    await expectVisible(kitchenRow.getByText('Unverified', { exact: true }).first());
    await expectVisible(page.getByRole('listitem').filter({ hasText: 'Bedroom TV' }));
    await screenshot(page, 'devices-1-list');
    await expectFitsPhone(page, 'devices-1-list-phone');

    // Each Sign out button names its device for screen readers; the header's own Sign out stays apart.
    await kitchenRow.getByRole('button', { name: 'Sign out Living Room TV (Kitchen TV)', exact: true }).click();
    await expectVisible(page.getByRole('status'));
    expect(await page.getByRole('listitem').filter({ hasText: 'Kitchen TV' }).count()).toBe(0);
    await expectVisible(page.getByRole('listitem').filter({ hasText: 'Bedroom TV' }));
    await screenshot(page, 'devices-2-signed-out');

    expectAllLocal(requests);
    expect(await userinfoStatus(kitchen)).toBe(401);
    expect(await userinfoStatus(bedroom)).toBe(200);
  });
});

describe('Connected apps', () => {
  it("removes an app's access: the app leaves the list and its devices stop working", async () => {
    const user = await seedUser(suite.e2e.t);
    const tvToken = await connect(suite.tv, user.userId);
    const botToken = await connect(suite.bot, user.userId);

    const { page, requests } = await openAccountPage('/account/apps', user, 'Connected apps');
    const botRow = page.getByRole('listitem').filter({ has: page.getByRole('heading', { name: 'Helper Bot' }) });
    await expectVisible(botRow);
    await expectVisible(page.getByRole('listitem').filter({ has: page.getByRole('heading', { name: 'Living Room TV' }) }));
    await screenshot(page, 'apps-1-list');
    await expectFitsPhone(page, 'apps-1-list-phone');

    await botRow.getByRole('button', { name: 'Remove access for Helper Bot' }).click();
    await expectVisible(page.getByRole('status'));
    expect(await page.getByRole('heading', { name: 'Helper Bot' }).count()).toBe(0);
    await expectVisible(page.getByRole('heading', { name: 'Living Room TV' }));
    await screenshot(page, 'apps-2-removed');

    expectAllLocal(requests);
    expect(await userinfoStatus(botToken)).toBe(401);
    expect(await userinfoStatus(tvToken)).toBe(200);
  });
});

describe('the pages around the flow', () => {
  it('the home page leads to each thing a user comes for; an address with no page says so; both fit a phone', async () => {
    const { page, requests } = await openPage(suite.e2e);
    await page.goto(`${suite.e2e.origin}/`);
    await expectHeading(page, 'device-auth');
    for (const name of ['Connect a device', 'Connect a bot', 'Your devices', 'Your apps']) await expectVisible(page.getByRole('link', { name }));
    await screenshot(page, 'home-1-signed-out');
    await expectFitsPhone(page, 'home-2-phone');

    const missing = await page.goto(`${suite.e2e.origin}/no-such-page`);
    expect(missing?.status()).toBe(404);
    await expectHeading(page, 'Page not found');
    await screenshot(page, 'not-found');

    await page.goto(`${suite.e2e.origin}/`);
    await page.getByRole('link', { name: 'Connect a device' }).click();
    await signInHere(page, await seedUser(suite.e2e.t));
    await expectHeading(page, 'Connect a device');
    expectAllLocal(requests);
  });

  it('a code that ran out: the code step says so and what to do', async () => {
    const user = await seedUser(suite.e2e.t);
    const started = await startDeviceFlow(suite.e2e.t, suite.tv.clientId);
    const { page } = await openAccountPage('/activate', user, 'Connect a device');
    suite.e2e.t.clock.advance(started.expires_in + 1);
    await page.getByLabel('Code').fill(started.user_code);
    await page.getByRole('button', { name: 'Continue' }).click();
    await expectVisible(page.getByRole('alert').getByText('That code has expired. Start again on your device to get a new code.'));
    await screenshot(page, 'expired-code');
  });
});
