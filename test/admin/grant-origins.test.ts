import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { FORM, form, seedClient, seedUser } from '../helpers/app.js';
import { Browser, signIn as signInBrowser } from '../helpers/browser.js';
import {
  adminCall,
  AMAZON_AS,
  approverBrowser,
  COMCAST_AS,
  deviceGrant,
  EC2_KOREA,
  from,
  HOME_DE,
  HOME_US,
  startOriginApp,
  TELEKOM_AS,
  type OriginApp,
} from '../helpers/grant-origins.js';
import { hashOpaque } from '../../src/oauth/opaque-tokens.js';
import { authorizeUrl, codeFor, pkcePair, REDIRECT_URI, seedWebApp } from '../helpers/web-app.js';

/**
 * Issue 31 §1: every grant knows where it came from, and the admin API finds grants by it. One
 * app for the file: a phished TV grant (asked from EC2 in Korea, approved from a German home
 * line), a TV grant at home in the US, a bot grant of another user from a German home line
 * approved later, and a web app's code-flow grant signed in from a US home line.
 */

vi.setConfig({ testTimeout: 60_000, hookTimeout: 180_000 });

let o: OriginApp;
const ids: Record<'phished' | 'home' | 'bot' | 'web', string> = { phished: '', home: '', bot: '', web: '' };
let tvId: string;
let botId: string;
let victim: { email: string; userId: string };
let before: string;
let between: string;

const get = (path: string) => adminCall(o, 'GET', path);
const grantIdsOf = (body: { items: { grant_id: string }[] }) => body.items.map((g) => g.grant_id).sort();
const grantOfToken = async (accessToken: string) =>
  (await o.t.deps.db.selectFrom('access_tokens').select('grant_id').where('token_hash', '=', hashOpaque(accessToken)).executeTakeFirstOrThrow()).grant_id;

beforeAll(async () => {
  o = await startOriginApp();
  const { t } = o;
  const tv = await seedClient(t, { kind: 'tv', name: 'Living Room TV' });
  const bot = await seedClient(t, { kind: 'tv', name: 'Bedroom TV' });
  tvId = tv.clientId;
  botId = bot.clientId;
  const u1 = await seedUser(t);
  const u2 = await seedUser(t);
  victim = u1;
  before = t.clock.now().toISOString();
  ids.phished = await grantOfToken((await deviceGrant(t, tv.clientId, EC2_KOREA(0), await approverBrowser(t, HOME_DE(0), u1))).access_token);
  ids.home = await grantOfToken((await deviceGrant(t, tv.clientId, HOME_US(0), await approverBrowser(t, HOME_US(0), u2))).access_token);
  t.clock.advance(3600);
  between = t.clock.now().toISOString();
  ids.bot = await grantOfToken((await deviceGrant(t, bot.clientId, HOME_DE(5), await approverBrowser(t, HOME_DE(5), u2))).access_token);
  // The code flow: the browser signs in and agrees from a US home line; the app's server redeems.
  const web = await seedWebApp(t, { scopes: ['openid', 'profile', 'offline_access'] });
  const browser = new Browser(t, { headers: from(HOME_US(9)) });
  expect((await signInBrowser(browser, u1)).statusCode).toBe(303);
  const pkce = pkcePair();
  const code = (await codeFor(browser, authorizeUrl(web, pkce.challenge, { scope: 'openid profile' }))).get('code')!;
  const redeemed = await t.app.inject({
    method: 'POST',
    url: '/oauth/token',
    headers: { ...FORM, ...from('3.80.0.1') },
    payload: form({ grant_type: 'authorization_code', redirect_uri: REDIRECT_URI, client_id: web.clientId, code, code_verifier: pkce.verifier }),
  });
  expect(redeemed.statusCode, redeemed.body).toBe(200);
  ids.web = await grantOfToken(redeemed.json().access_token);
});
afterAll(() => o?.close());

describe('§1 a grant records its origin at issuance', () => {
  it('a device grant: requester, approver and redeemer with network, country and hosting; the signals, the decision and the ticked box', async () => {
    const { body, status } = await get(`/admin/grants?user=${encodeURIComponent(victim.email)}&grant_type=device_code`);
    expect(status).toBe(200);
    expect(body.items).toHaveLength(1);
    expect(body.items[0]).toMatchObject({
      grant_id: ids.phished,
      client_id: tvId,
      grant_type: 'device_code',
      live: true,
      requester: { address: EC2_KOREA(0), asn: AMAZON_AS, country: 'KR', hosting: true, network: 'Amazon.com, Inc.' },
      approver: { address: HOME_DE(0), asn: TELEKOM_AS, country: 'DE', hosting: false, network: 'Deutsche Telekom AG' },
      redeemer: { address: EC2_KOREA(0), asn: AMAZON_AS, country: 'KR', hosting: true },
      decision: { action: 'confirm', confirmed: true, redeemer_action: 'allow' },
    });
    expect([...body.items[0].signals].sort()).toEqual(['country_mismatch', 'hosting_network']);
  });

  it('a device grant approved at home: no signals, allow, no box', async () => {
    const { body } = await get(`/admin/grants?asn=${COMCAST_AS}&grant_type=device_code`);
    expect(grantIdsOf(body)).toEqual([ids.home]);
    expect(body.items[0]).toMatchObject({ signals: [], decision: { action: 'allow', confirmed: false } });
  });

  it("a code-flow grant: where the user signed in, never the address of the app's server that redeemed the code", async () => {
    const { body } = await get('/admin/grants?grant_type=authorization_code');
    expect(grantIdsOf(body)).toEqual([ids.web]);
    expect(body.items[0]).toMatchObject({
      requester: { address: HOME_US(9), asn: COMCAST_AS, country: 'US', hosting: false },
      approver: null,
      redeemer: null,
      decision: null,
    });
  });

  it('the Devices page still says where each device signed in', async () => {
    const browser = await approverBrowser(o.t, HOME_DE(0), { email: victim.email, password: 'correct horse battery staple' });
    const page = await browser.get('/account/devices');
    expect(page.statusCode).toBe(200);
    expect(page.body).toContain('South Korea');
  });
});

describe('§1 filters, each and combined; count; keyset paging', () => {
  it.each([
    ['client', () => `client=${tvId}`, () => [ids.phished, ids.home]],
    ['two clients', () => `client=${tvId},${botId}`, () => [ids.phished, ids.home, ids.bot]],
    ['user', () => `user=${encodeURIComponent(victim.email)}`, () => [ids.phished, ids.web]],
    ['grant type', () => 'grant_type=device_code', () => [ids.phished, ids.home, ids.bot]],
    ['requester ASN', () => `asn=${AMAZON_AS}`, () => [ids.phished]],
    ['ASN with its AS prefix, among others', () => `asn=AS${TELEKOM_AS},${AMAZON_AS}`, () => [ids.phished, ids.bot]],
    ['country', () => 'country=kr', () => [ids.phished]],
    ['hosting', () => 'hosting=true', () => [ids.phished]],
    ['not hosting', () => 'hosting=false', () => [ids.home, ids.bot, ids.web]],
    ['signal', () => 'signal=country_mismatch', () => [ids.phished]],
    ['approved before an instant', () => `approved_before=${encodeURIComponent(between)}`, () => [ids.phished, ids.home]],
    ['approved after an instant', () => `approved_after=${encodeURIComponent(between)}`, () => [ids.bot, ids.web]],
    ['a window', () => `approved_after=${encodeURIComponent(before)}&approved_before=${encodeURIComponent(between)}`, () => [ids.phished, ids.home]],
    ['combined: country and window and type', () => `country=DE&approved_after=${encodeURIComponent(between)}&grant_type=device_code`, () => [ids.bot]],
    ['live', () => 'live=true', () => Object.values(ids)],
    ['not live', () => 'live=false', () => []],
  ])('%s', async (_name, filter, expected) => {
    const list = await get(`/admin/grants?${filter()}`);
    expect(list.status, JSON.stringify(list.body)).toBe(200);
    expect(grantIdsOf(list.body)).toEqual([...expected()].sort());
    const count = await get(`/admin/grants/count?${filter()}`);
    expect(count).toEqual({ status: 200, body: { count: expected().length } });
  });

  it('pages in approval order, each grant once, with next_after null on the last page', async () => {
    const seen: string[] = [];
    let after: string | null = null;
    for (let page = 0; page < 10; page++) {
      const { body } = await get(`/admin/grants?limit=1${after ? `&after=${after}` : ''}`);
      seen.push(...body.items.map((g: { grant_id: string }) => g.grant_id));
      after = body.next_after;
      if (after === null) break;
    }
    expect(seen).toHaveLength(4);
    expect([...seen].sort()).toEqual(Object.values(ids).sort());
    expect(seen.slice(0, 2).sort()).toEqual([ids.phished, ids.home].sort());
  });

  it('an unknown user or client is a 404 naming it', async () => {
    expect(await get('/admin/grants/count?user=nobody%40example.test')).toMatchObject({ status: 404, body: { detail: 'no user nobody@example.test' } });
    expect(await get(`/admin/grants?client=${tvId},tv_doesnotexist`)).toMatchObject({ status: 404, body: { detail: 'no client tv_doesnotexist' } });
  });
});

describe('§1 hostile input on every filter: a clear 400, whole', () => {
  const NUL = '%00';
  const LONE_SURROGATE = '%ED%A0%80';
  const INVALID_UTF8 = '%C3%28';
  it.each([
    ['an unknown country', 'country=ZZ', 'not an ISO 3166-1 alpha-2 country code'],
    ['a list with one unknown country', 'country=DE,XK,FR', 'not an ISO 3166-1 alpha-2 country code'],
    ['a country of three letters', 'country=DEU', 'ISO 3166-1 alpha-2'],
    ['an ASN over 4294967295', 'asn=4294967296', '0 to 4294967295'],
    ['a negative ASN', 'asn=-1', '0 to 4294967295'],
    ['a list with one bad ASN', `asn=${AMAZON_AS},x`, '0 to 4294967295'],
    ['a huge ASN', `asn=${'9'.repeat(5000)}`, '0 to 4294967295'],
    ['an unknown signal', 'signal=made_up', 'signal'],
    ['an unknown grant type', 'grant_type=client_credentials', 'grant_type'],
    ['a hosting flag that is no boolean', 'hosting=yes', 'hosting'],
    ['a time that is no ISO 8601 instant', 'approved_after=yesterday', 'approved_after'],
    [
      'a window that ends before it starts',
      'approved_after=2026-11-02T00:00:00Z&approved_before=2026-11-01T00:00:00Z',
      'approved_after must be before approved_before',
    ],
    ['too many items', `asn=${Array.from({ length: 101 }, (_, i) => i).join(',')}`, 'at most 100'],
    ['a NUL in an email', `user=a${NUL}b%40example.test`, 'user'],
    ['a NUL in a client id', `client=tv_${NUL}`, 'client'],
    ['a NUL in a country', `country=D${NUL}`, 'country'],
  ])('%s', async (_name, query, message) => {
    for (const path of ['/admin/grants', '/admin/grants/count']) {
      const res = await get(`${path}?${query}`);
      expect(res.status, JSON.stringify(res.body)).toBe(400);
      expect(res.body.detail).toContain(message);
    }
  });

  it.each([
    ['a lone surrogate', LONE_SURROGATE],
    ['invalid UTF-8', INVALID_UTF8],
  ])('%s in any filter: 400', async (_name, bytes) => {
    for (const name of ['user', 'client', 'country', 'asn', 'signal', 'approved_after']) {
      const res = await get(`/admin/grants/count?${name}=x${bytes}`);
      expect(res.status, `${name}: ${JSON.stringify(res.body)}`).toBe(400);
    }
  });
});
