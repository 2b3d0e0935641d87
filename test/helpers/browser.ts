import type { LightMyRequestResponse as Response } from 'fastify';
import { expect } from 'vitest';
import { FORM, form, type TestApp } from './app.js';

/**
 * A browser as far as the pages care: keeps cookies between app.inject calls and remembers the
 * CSRF token of the last page that carried one.
 */
export class Browser {
  readonly cookies = new Map<string, string>();
  csrfToken: string | null = null;

  /**
   * `remoteAddress`: the address every request of this browser comes from (default: the test's
   * loopback); `headers`: sent with every request (Accept-Language, say).
   */
  constructor(
    private readonly t: TestApp,
    private readonly options: { remoteAddress?: string; headers?: Record<string, string> } = {},
  ) {}

  get(url: string): Promise<Response> {
    return this.#send('GET', url);
  }

  /** Posts a form with the remembered CSRF token; `csrfToken: null` leaves it out, a string replaces it. */
  post(url: string, fields: Record<string, string | undefined>, options: { csrfToken?: string | null } = {}): Promise<Response> {
    const token = options.csrfToken === undefined ? this.csrfToken : options.csrfToken;
    return this.#send('POST', url, form({ csrf_token: token ?? undefined, ...fields }));
  }

  /** Follows one redirect, as a browser does after a 303. */
  async follow(response: Response): Promise<Response> {
    expect(response.statusCode, response.body).toBe(303);
    const location = response.headers.location;
    if (typeof location !== 'string' || !location.startsWith('/')) throw new Error(`not a local redirect: ${String(location)}`);
    return this.get(location);
  }

  async #send(method: 'GET' | 'POST', url: string, payload?: string): Promise<Response> {
    const cookie = [...this.cookies].map(([name, value]) => `${name}=${value}`).join('; ');
    const response = await this.t.app.inject({
      method,
      url,
      headers: { ...this.options.headers, ...(payload === undefined ? {} : FORM), ...(cookie ? { cookie } : {}) },
      ...(payload === undefined ? {} : { payload }),
      ...(this.options.remoteAddress ? { remoteAddress: this.options.remoteAddress } : {}),
    });
    for (const set of response.cookies) {
      const expired = set.maxAge === 0 || (set.expires !== undefined && set.expires.getTime() <= Date.now());
      if (expired) this.cookies.delete(set.name);
      else this.cookies.set(set.name, set.value);
    }
    const token = /name="csrf_token" value="([^"]*)"/.exec(response.body)?.[1];
    if (token) this.csrfToken = token;
    return response;
  }
}

export async function signIn(browser: Browser, user: { email: string; password: string }, returnTo?: string): Promise<Response> {
  await browser.get(returnTo ? `/signin?return_to=${encodeURIComponent(returnTo)}` : '/signin');
  return browser.post('/signin', { email: user.email, password: user.password, return_to: returnTo });
}

export async function signedInBrowser(t: TestApp, user: { email: string; password: string }): Promise<Browser> {
  const browser = new Browser(t);
  const response = await signIn(browser, user);
  expect(response.statusCode, response.body).toBe(303);
  return browser;
}

/** The value of a named input in a page. */
export function inputValue(html: string, name: string): string | undefined {
  return new RegExp(`name="${name}"[^>]*value="([^"]*)"`).exec(html)?.[1];
}

/** The phrase choices of an approval page, in the order shown. */
export function phraseChoices(html: string): string[] {
  return [...html.matchAll(/name="phrase" value="([^"]*)"/g)].map((match) => match[1] ?? '');
}
