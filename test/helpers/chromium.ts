import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser, type BrowserContextOptions, type Locator, type Page, type Request } from 'playwright-core';
import { afterAll, afterEach, beforeAll, expect } from 'vitest';
import type { DeviceAuthorizationResponse } from '../../src/oauth/device/authorization.js';
import { FORM, form, seedClient, seedUser, startTestApp, type TestApp } from './app.js';
import { poll } from './device.js';
import { fetchingFrom, pngHandler, startIconServer, type IconServer } from './icon-server.js';
import { freePort } from './server-process.js';

/** Debian's package; `.ci/run` installs it when missing. Never a downloaded browser. */
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--no-first-run',
  '--disable-sync',
  '--disable-quic',
];

const SCREENSHOTS = fileURLToPath(new URL('../../test-artifacts/screenshots/', import.meta.url));

/** Bounds every wait on a page: a missing element fails the test in seconds, not at the test timeout. */
const ACTION_TIMEOUT_MS = 10_000;

export interface E2e {
  t: TestApp;
  /** http://127.0.0.1:PORT, also the ISSUER, so every URL the server hands out points here. */
  origin: string;
  /** The devices' icon host (https, loopback), fetched from by the server only; /tv.png is an icon. */
  iconServer: IconServer;
  browser: Browser;
  /** Closes every page opened since the last call: each test starts without cookies. */
  closePages(): Promise<void>;
  close(): Promise<void>;
}

/** The app listening on loopback with a manual clock, and a headless Chromium to drive it. */
async function startE2e(env: Record<string, string> = {}): Promise<E2e> {
  const port = await freePort();
  const origin = `http://127.0.0.1:${port}`;
  const iconServer = await startIconServer();
  iconServer.route('/tv.png', pngHandler);
  const fetching = fetchingFrom(iconServer);
  const t = await startTestApp({ ...fetching, env: { ...fetching.env, ...env, ISSUER: origin } });
  await t.app.listen({ port, host: '127.0.0.1' });
  let browser: Browser;
  try {
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS, timeout: 30_000 });
  } catch (error) {
    await t.close();
    await iconServer.close();
    throw new Error(`cannot start Chromium at ${CHROMIUM} (apt-get install -y chromium): ${String(error)}`);
  }
  mkdirSync(SCREENSHOTS, { recursive: true });
  return {
    t,
    origin,
    iconServer,
    browser,
    async closePages() {
      for (const context of browser.contexts()) await context.close();
    },
    async close() {
      await browser.close();
      await t.close();
      await iconServer.close();
    },
  };
}

export type Suite<S> = { e2e: E2e } & S;

/**
 * Registers a test file's hooks: one app (seeded once) and one browser for all its tests, each
 * test's pages closed after it. The returned object is filled in before the first test runs.
 */
export function useE2e<S extends object>(seed: (t: TestApp) => Promise<S>, env: Record<string, string> = {}): Suite<S> {
  const suite = {} as Suite<S>;
  beforeAll(async () => {
    suite.e2e = await startE2e(env);
    Object.assign(suite, await seed(suite.e2e.t));
  });
  afterEach(() => suite.e2e?.closePages());
  afterAll(() => suite.e2e?.close());
  return suite;
}

/** A public TV app and a confidential bot. */
export async function seedTvAndBot(t: TestApp) {
  return {
    tv: await seedClient(t, { kind: 'tv', name: 'Living Room TV' }),
    bot: await seedClient(t, { kind: 'bot', type: 'confidential', name: 'Helper Bot' }),
  };
}

export interface TestPage {
  page: Page;
  /** Every request the page made, in order, including those answered or refused by the route below. */
  requests: Request[];
}

/**
 * A fresh browser context (no cookies) with one page, closed by e2e.closePages(). Nothing leaves loopback: a request to
 * any other origin (a device's icon host included) is refused, and recorded for the test to see.
 */
export async function openPage(e2e: E2e, options: BrowserContextOptions = {}): Promise<TestPage> {
  const context = await e2e.browser.newContext({ viewport: { width: 1024, height: 768 }, ...options });
  context.setDefaultTimeout(ACTION_TIMEOUT_MS);
  context.setDefaultNavigationTimeout(ACTION_TIMEOUT_MS);
  const requests: Request[] = [];
  context.on('request', (request) => requests.push(request));
  await context.route(
    (url) => url.origin !== e2e.origin,
    (route) => route.abort('blockedbyclient'),
  );
  const page = await context.newPage();
  return { page, requests };
}

/** A full-page PNG of what the page shows now, named by step, for people to look at. */
export async function screenshot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: path.join(SCREENSHOTS, `${name}.png`), fullPage: true });
}

export async function expectVisible(locator: Locator): Promise<void> {
  await locator.waitFor({ state: 'visible' });
}

export async function expectHeading(page: Page, name: string): Promise<void> {
  await expectVisible(page.getByRole('heading', { level: 1, name }));
}

/** The path and query the page is at. */
export function pagePath(page: Page): string {
  const url = new URL(page.url());
  return url.pathname + url.search;
}

/** Fills the sign-in form the page was sent to, as a person would, and waits for where it leads. */
export async function signInHere(page: Page, user: { email: string; password: string }): Promise<void> {
  await expectHeading(page, 'Sign in');
  await page.getByLabel('Email').fill(user.email);
  await page.getByLabel('Password').fill(user.password);
  await Promise.all([page.waitForURL((url) => url.pathname !== '/signin'), page.getByRole('button', { name: 'Sign in' }).click()]);
}

export async function submitCode(page: Page, userCode: string): Promise<void> {
  await page.getByLabel('Code').fill(userCode);
  await page.getByRole('button', { name: 'Continue' }).click();
}

/** The phrase choices of the approval page, as the labels of its radios. */
export async function phraseLabels(page: Page): Promise<string[]> {
  const radios = page.getByRole('radio');
  const labels: string[] = [];
  for (const radio of await radios.all()) labels.push((await radio.getAttribute('value')) ?? '');
  return labels;
}

export async function pickPhraseAndPress(page: Page, phrase: string, button: 'Approve' | 'Deny'): Promise<void> {
  await page.getByRole('radio', { name: phrase, exact: true }).check();
  await page.getByRole('button', { name: button, exact: true }).click();
}

/** What the device hears on its next poll, after waiting its interval on the test's clock. */
export async function devicePoll(e2e: E2e, clientId: string | undefined, started: DeviceAuthorizationResponse, headers: Record<string, string> = {}) {
  e2e.t.clock.advance(5);
  return poll(e2e.t, clientId, started.device_code, headers);
}

export async function expectTokens(response: Awaited<ReturnType<typeof poll>>): Promise<{ access_token: string; refresh_token: string }> {
  expect(response.statusCode, response.body).toBe(200);
  const tokens = response.json() as { access_token: string; refresh_token: string };
  expect(tokens.access_token).toMatch(/^da_at_/);
  return tokens;
}

/** Horizontal scrolling the page would need at its current viewport. */
export function scrollWidth(page: Page): Promise<number> {
  return page.evaluate(() => document.documentElement.scrollWidth);
}

/** A device request that reaches the server through the (trusted, TRUST_PROXY) proxy as from `address`; `fields` adds to its form. */
export async function requestCodeFrom(
  e2e: E2e,
  clientId: string,
  address: string,
  headers: Record<string, string> = {},
  fields: Record<string, string> = {},
): Promise<DeviceAuthorizationResponse> {
  const res = await e2e.t.app.inject({
    method: 'POST',
    url: '/oauth/device/code',
    headers: { ...FORM, ...headers, 'x-forwarded-for': address },
    payload: form({ client_id: clientId, ...fields }),
  });
  expect(res.statusCode, res.body).toBe(200);
  return res.json();
}

/** A new user's browser whose every request arrives through the (trusted) proxy as from `address`, signed in at /activate. */
export async function approverFrom(e2e: E2e, address: string, options: BrowserContextOptions = {}): Promise<Page> {
  const { page } = await openPage(e2e, { ...options, extraHTTPHeaders: { 'X-Forwarded-For': address } });
  await page.goto(`${e2e.origin}/activate`);
  await signInHere(page, await seedUser(e2e.t));
  return page;
}
