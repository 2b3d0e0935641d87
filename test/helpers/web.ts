import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'vitest';
import type { DeviceAuthorizationResponse } from '../../src/oauth/device/authorization.js';
import { FORM, form } from './app.js';
import { inputValue } from './browser.js';
import { DEVICE_GRANT } from './device.js';
import { authentication, type TestClient, type TokenSet } from './tokens.js';

/** Real HTTP to a server process on loopback: what app.inject is to the in-process tests. */

const REQUEST_TIMEOUT_MS = 15_000;

export interface WebResponse {
  status: number;
  headers: Headers;
  body: string;
  json<T = Record<string, unknown>>(): T;
}

/** One request, never following redirects, bounded in time. */
export async function send(url: string, options: { headers?: Record<string, string>; form?: Record<string, string | undefined> } = {}): Promise<WebResponse> {
  const response = await fetch(url, {
    method: options.form ? 'POST' : 'GET',
    headers: { ...(options.form ? FORM : {}), ...options.headers },
    ...(options.form ? { body: form(options.form) } : {}),
    redirect: 'manual',
    signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
  });
  const body = await response.text();
  return { status: response.status, headers: response.headers, body, json: <T>() => JSON.parse(body) as T };
}

/**
 * A browser over real HTTP: a cookie jar and the CSRF token of the last page that carried one.
 * One jar serves every server it talks to, as when instances sit behind one load balancer
 * (browsers do not tell ports apart for cookies either); `via` picks the server of a request.
 */
export class WebBrowser {
  readonly cookies = new Map<string, string>();
  csrfToken: string | null = null;

  constructor(readonly server: string) {}

  get(path: string, options: { via?: string } = {}): Promise<WebResponse> {
    return this.#send(options.via ?? this.server, path);
  }

  /** Posts a form with the remembered CSRF token. */
  post(path: string, fields: Record<string, string | undefined>, options: { via?: string } = {}): Promise<WebResponse> {
    return this.#send(options.via ?? this.server, path, { csrf_token: this.csrfToken ?? undefined, ...fields });
  }

  async #send(server: string, path: string, fields?: Record<string, string | undefined>): Promise<WebResponse> {
    const cookie = [...this.cookies].map(([name, value]) => `${name}=${value}`).join('; ');
    const response = await send(`${server}${path}`, { headers: cookie ? { cookie } : {}, ...(fields ? { form: fields } : {}) });
    rememberCookies(this.cookies, response.headers.getSetCookie());
    const token = inputValue(response.body, 'csrf_token');
    if (token) this.csrfToken = token;
    return response;
  }
}

/** Keeps what Set-Cookie lines set in a jar, and forgets what they expire. */
export function rememberCookies(cookies: Map<string, string>, setCookieLines: readonly string[]): void {
  for (const line of setCookieLines) {
    const [pair = '', ...attributes] = line.split(';').map((part) => part.trim());
    const name = pair.slice(0, pair.indexOf('='));
    const value = pair.slice(pair.indexOf('=') + 1);
    const expired = value === '' || attributes.some((a) => /^max-age=0$/i.test(a) || (/^expires=/i.test(a) && Date.parse(a.slice(8)) <= Date.now()));
    if (expired) cookies.delete(name);
    else cookies.set(name, value);
  }
}

export async function signInOverHttp(browser: WebBrowser, user: { email: string; password: string }, options: { via?: string } = {}) {
  await browser.get('/signin', options);
  const response = await browser.post('/signin', { email: user.email, password: user.password }, options);
  expect(response.status, response.body).toBe(303);
}

/**
 * The verification pages as a signed-in user goes through them: the code, then the phrase the
 * device shows. Returns the first answer that is not the next page (a refusal, a 503), or the result page.
 */
export async function approveOverHttp(
  browser: WebBrowser,
  userCode: string,
  phrase: string,
  options: { via?: string; page?: '/activate' | '/activate/bot' } = {},
) {
  const page = options.page ?? '/activate';
  const codeStep = await browser.get(`${page}?user_code=${encodeURIComponent(userCode)}`, options);
  if (codeStep.status !== 200) return codeStep;
  const approvalStep = await browser.post(page, { user_code: userCode }, options);
  if (approvalStep.status !== 200) return approvalStep;
  const requestHandle = inputValue(approvalStep.body, 'request_handle');
  return browser.post(`${page}/decision`, { user_code: userCode, request_handle: requestHandle, action: 'approve', phrase }, options);
}

function postAsOverHttp(server: string, client: TestClient, path: string, fields: Record<string, string | undefined>) {
  const { fields: auth, headers } = authentication(client);
  return send(`${server}${path}`, { headers, form: { ...auth, ...fields } });
}

export const requestCodeOverHttp = (server: string, client: TestClient, scope?: string) => postAsOverHttp(server, client, '/oauth/device/code', { scope });
export const pollOverHttp = (server: string, client: TestClient, deviceCode: string) =>
  postAsOverHttp(server, client, '/oauth/token', { grant_type: DEVICE_GRANT, device_code: deviceCode });
export const refreshOverHttp = (server: string, client: TestClient, refreshToken: string) =>
  postAsOverHttp(server, client, '/oauth/token', { grant_type: 'refresh_token', refresh_token: refreshToken });
export const introspectOverHttp = (server: string, resourceServer: TestClient, token: string) =>
  postAsOverHttp(server, resourceServer, '/oauth/introspect', { token });
export const revokeOverHttp = (server: string, client: TestClient, token: string) => postAsOverHttp(server, client, '/oauth/revoke', { token });
export const userinfoOverHttp = (server: string, accessToken: string) =>
  send(`${server}/oauth/userinfo`, { headers: { authorization: `Bearer ${accessToken}` } });

/** Polls as RFC 8628 §3.5 asks (the interval, +5 s on slow_down) until the tokens come; bounded. */
export async function pollUntilIssued(server: string, client: TestClient, flow: { device_code: string; interval: number }, boundMs = 20_000) {
  const deadline = Date.now() + boundMs;
  let interval = flow.interval;
  while (Date.now() < deadline) {
    await sleep(interval * 1000 + 50);
    const response = await pollOverHttp(server, client, flow.device_code);
    if (response.status === 200) return response.json<TokenSet>();
    const error = response.json().error;
    if (error === 'slow_down') interval += 5;
    else if (error !== 'authorization_pending') throw new Error(`poll refused: ${response.body}`);
  }
  throw new Error(`no tokens within ${boundMs} ms`);
}

/** A device flow across servers: code from `issue`, approved on `approve`'s pages, redeemed at `redeem`. */
export async function deviceSignInOverHttp(
  browser: WebBrowser,
  client: TestClient,
  servers: { issue: string; approve: string; redeem: string },
  scope = 'openid profile email offline_access',
): Promise<TokenSet> {
  const issued = await requestCodeOverHttp(servers.issue, client, scope);
  expect(issued.status, issued.body).toBe(200);
  const flow = issued.json<DeviceAuthorizationResponse>();
  const decision = await approveOverHttp(browser, flow.user_code, flow.confirmation_phrase, { via: servers.approve });
  expect(decision.body).toContain('Device connected');
  return pollUntilIssued(servers.redeem, client, flow);
}
