import { randomBytes } from 'node:crypto';
import type { LightMyRequestResponse as Response } from 'fastify';
import { expect } from 'vitest';
import { s256Challenge } from '../../src/oauth/pkce.js';
import { seedClient, type TestApp } from './app.js';
import type { Browser } from './browser.js';

/** A web app's registered redirect URI in these tests: never fetched, only compared and redirected to. */
export const REDIRECT_URI = 'https://photos.example/callback';

export function pkcePair(): { verifier: string; challenge: string } {
  const verifier = randomBytes(32).toString('base64url');
  return { verifier, challenge: s256Challenge(verifier) };
}

/** A web app registered for the authorization-code grant (and refresh tokens, which it gets only with offline_access). */
export async function seedWebApp(t: TestApp, options: { type?: 'public' | 'confidential'; scopes?: string[]; name?: string; redirectUris?: string[] } = {}) {
  const client = await seedClient(t, {
    kind: 'web',
    type: options.type ?? 'public',
    name: options.name ?? 'Photo Board',
    scopes: options.scopes ?? ['openid', 'profile', 'email', 'offline_access'],
    grantTypes: ['authorization_code', 'refresh_token'],
    redirectUris: options.redirectUris ?? [REDIRECT_URI],
  });
  return { ...client, name: options.name ?? 'Photo Board' };
}

export type WebApp = Awaited<ReturnType<typeof seedWebApp>>;

/** An authorization request's URL; a parameter given as undefined is left out. */
export function authorizeUrl(client: { clientId: string }, challenge: string, extra: Record<string, string | undefined> = {}): string {
  const fields: Record<string, string | undefined> = {
    response_type: 'code',
    client_id: client.clientId,
    redirect_uri: REDIRECT_URI,
    scope: 'openid profile',
    state: 'state-123',
    code_challenge: challenge,
    code_challenge_method: 'S256',
    nonce: 'nonce-456',
    ...extra,
  };
  const query = new URLSearchParams();
  for (const [name, value] of Object.entries(fields)) if (value !== undefined) query.append(name, value);
  return `/oauth/authorize?${query.toString()}`;
}

/** The parameters of a redirect to the app; fails unless the answer is a 303 to `redirectUri`. */
export function answerAtApp(response: Response, redirectUri = REDIRECT_URI): URLSearchParams {
  expect(response.statusCode, response.body).toBe(303);
  const location = String(response.headers.location);
  const url = new URL(location);
  expect(`${url.origin}${url.pathname}`).toBe(redirectUri.split('?')[0]);
  return url.searchParams;
}

function unescapeHtml(text: string): string {
  return text
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&amp;/g, '&');
}

/** The hidden fields of a page's form (the consent page's copy of the request), unescaped. */
export function hiddenFields(html: string): Record<string, string> {
  const fields: Record<string, string> = {};
  for (const match of html.matchAll(/<input type="hidden" name="([^"]*)" value="([^"]*)">/g)) {
    const name = unescapeHtml(match[1] ?? '');
    if (name !== 'csrf_token') fields[name] = unescapeHtml(match[2] ?? '');
  }
  return fields;
}

/** Answers the consent page that `page` is, as the user would press the button. */
export function answerConsent(browser: Browser, page: Response, action: 'allow' | 'deny'): Promise<Response> {
  expect(page.statusCode, page.body).toBe(200);
  expect(page.body).toContain('name="action" value="allow"');
  return browser.post('/oauth/authorize/decision', { ...hiddenFields(page.body), action });
}

/** From an authorization request to its code, for a browser already signed in; consents if asked. */
export async function codeFor(browser: Browser, url: string): Promise<URLSearchParams> {
  const first = await browser.get(url);
  if (first.statusCode === 303) return answerAtApp(first);
  return answerAtApp(await answerConsent(browser, first, 'allow'));
}
