import { expect } from 'vitest';
import type { TestApp } from './app.js';
import { Browser, inputValue, signIn } from './browser.js';

/**
 * The approval page as a signed-in user reaches it from one place: `from` is either the socket's
 * address (remoteAddress) or headers every request carries (X-Forwarded-For behind TRUST_PROXY).
 */
export async function approverAt(t: TestApp, from: { remoteAddress: string } | { headers: Record<string, string> }, user: { email: string; password: string }) {
  const browser = new Browser(t, from);
  expect((await signIn(browser, user)).statusCode).toBe(303);
  return browser;
}

export async function approvalPage(browser: Browser, userCode: string) {
  await browser.get('/activate');
  return browser.post('/activate', { user_code: userCode });
}

/** Posts the decision form of an approval page as shown, with `fields` (action, phrase, in_front_of_me). */
export function decideOnPage(browser: Browser, page: string, fields: Record<string, string>) {
  return browser.post('/activate/decision', { user_code: inputValue(page, 'user_code'), request_handle: inputValue(page, 'request_handle'), ...fields });
}
