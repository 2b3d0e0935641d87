import type { FastifyInstance } from 'fastify';
import { expect } from 'vitest';
import { buildAdminApp } from '../../src/admin-app.js';
import type { DeviceAuthorizationResponse } from '../../src/oauth/device/authorization.js';
import { sql } from 'kysely';
import { FORM, form, startTestApp, type Seedable, type TestApp } from './app.js';
import { approvalPage, approverAt, decideOnPage } from './approval.js';
import type { Browser } from './browser.js';
import { DEVICE_GRANT } from './device.js';
import type { TokenSet } from './tokens.js';

/**
 * Issue 31: grants whose parties are where the shipped location data puts them, through
 * TRUST_PROXY (the loopback balancer) and X-Forwarded-For. 3.34.0.0/16 is EC2 in Korea (AS16509,
 * hosting), 5.101.96.0/24 DigitalOcean in the Netherlands (AS14061, hosting), 95.216.0.0/24
 * Hetzner in Finland (AS24940, hosting), 79.192.0.0/16 Deutsche Telekom home lines (DE, AS3320),
 * 73.0.0.0/16 Comcast (US, AS7922).
 */
export const EC2_KOREA = (n: number) => `3.34.${Math.floor(n / 250)}.${(n % 250) + 1}`;
export const DIGITALOCEAN_NL = (n: number) => `5.101.96.${(n % 250) + 1}`;
export const HETZNER_FI = (n: number) => `95.216.0.${(n % 250) + 1}`;
export const HOME_DE = (n: number) => `79.192.${Math.floor(n / 250)}.${(n % 250) + 1}`;
export const HOME_US = (n: number) => `73.0.${Math.floor(n / 250)}.${(n % 250) + 1}`;
export const AMAZON_AS = 16509;
export const DIGITALOCEAN_AS = 14061;
export const HETZNER_AS = 24940;
export const TELEKOM_AS = 3320;
export const COMCAST_AS = 7922;

export const ADMIN_TOKEN = 'an-admin-token-of-at-least-32-characters-0123456789';

export const from = (address: string) => ({ 'x-forwarded-for': address });

export interface OriginApp {
  t: TestApp;
  adminApp: FastifyInstance;
  /** The admin API over its loopback TCP listener: real HTTP, so that calls can race. */
  adminUrl: string;
  close(): Promise<void>;
}

export async function startOriginApp(options: Parameters<typeof startTestApp>[0] = {}): Promise<OriginApp> {
  const t = await startTestApp({ ...options, env: { TRUST_PROXY: '127.0.0.1', ADMIN_TOKEN, ...options.env } });
  const adminApp = await buildAdminApp(t.deps, { listener: 'tcp', logger: false });
  await adminApp.listen({ host: '127.0.0.1', port: 0 });
  const adminUrl = `http://127.0.0.1:${(adminApp.server.address() as { port: number }).port}`;
  return {
    t,
    adminApp,
    adminUrl,
    async close() {
      await adminApp.close();
      await t.close();
    },
  };
}

/** One admin API call over HTTP; the body as JSON. */
export async function adminCall(o: Pick<OriginApp, 'adminUrl'>, method: 'GET' | 'POST', path: string, body?: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(`${o.adminUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, ...(body !== undefined && { 'content-type': 'application/json' }) },
    ...(body !== undefined && { body: JSON.stringify(body) }),
  });
  return { status: res.status, body: await res.json() };
}

export async function requestFrom(t: TestApp, clientId: string, address: string): Promise<DeviceAuthorizationResponse> {
  const res = await t.app.inject({ method: 'POST', url: '/oauth/device/code', headers: { ...FORM, ...from(address) }, payload: form({ client_id: clientId }) });
  expect(res.statusCode, res.body).toBe(200);
  return res.json();
}

export function pollFrom(t: TestApp, address: string, clientId: string, deviceCode: string) {
  return t.app.inject({
    method: 'POST',
    url: '/oauth/token',
    headers: { ...FORM, ...from(address) },
    payload: form({ grant_type: DEVICE_GRANT, device_code: deviceCode, client_id: clientId }),
  });
}

/** A signed-in browser at `address`: one sign-in per approver, however many codes they approve. */
export const approverBrowser = (t: TestApp, address: string, user: { email: string; password: string }) => approverAt(t, { headers: from(address) }, user);

/**
 * A device at `requester` asks for a code, `browser` approves it on the page (ticking "in front of
 * me" when the page asks for it), and the device collects its tokens from `redeemer`.
 */
export async function deviceGrant(t: TestApp, clientId: string, requester: string, browser: Browser, redeemer = requester): Promise<TokenSet> {
  const flow = await requestFrom(t, clientId, requester);
  await approveOnPage(browser, flow);
  t.clock.advance(flow.interval);
  const res = await pollFrom(t, redeemer, clientId, flow.device_code);
  expect(res.statusCode, res.body).toBe(200);
  return res.json();
}

/** `browser` approves the request of `flow` on the approval page, ticking "in front of me" when the page asks for it. */
export async function approveOnPage(browser: Browser, flow: DeviceAuthorizationResponse): Promise<void> {
  const page = await approvalPage(browser, flow.user_code);
  expect(page.statusCode, page.body).toBe(200);
  const confirm: Record<string, string> = page.body.includes('name="in_front_of_me"') ? { in_front_of_me: 'yes' } : {};
  const decided = await decideOnPage(browser, page.body, { action: 'approve', phrase: flow.confirmation_phrase, ...confirm });
  expect(decided.statusCode, decided.body).toBe(200);
}

/**
 * `count` live grants of one user and app, approved over the hour before now from AS 64500 (a
 * documentation AS), written in one statement: enough for several batches without issuing each.
 */
export async function seedGrants(t: Seedable & { clock: { now(): Date } }, clientId: string, userId: string, count: number, asn = 64500): Promise<void> {
  const now = t.clock.now();
  await sql`
    INSERT INTO grants (user_id, client_id, scopes, auth_time, created_at, last_used_at, expires_at, grant_type, approved_at,
                        signed_in_ip, requester_asn, requester_country, requester_hosting)
    SELECT ${userId}, ${clientId}, ARRAY['openid'], ${now}, ${now}, ${now}, ${now}::timestamptz + interval '30 days', 'device_code',
           ${now}::timestamptz - (i * interval '1 second'), '192.0.2.' || (i % 250 + 1), ${asn}, 'NL', true
    FROM generate_series(1, ${count}) AS i`.execute(t.deps.db);
}
