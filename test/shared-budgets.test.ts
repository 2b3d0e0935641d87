import type { LightMyRequestResponse as Response } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basicAuth, FORM, form, seedClient, seedUser, startTestApp, type TestApp } from './helpers/app.js';
import { DEVICE_GRANT, startDeviceFlow } from './helpers/device.js';
import { addressPrefixes } from '../src/lib/client-address.js';
import { floodAddresses, legitAddress, sendAll, timed } from './helpers/flood.js';
import { refresh, signIn, type TestClient, type TokenSet } from './helpers/tokens.js';

/**
 * Issue 28 §1: an app's budgets (device codes, token requests; since issue 30 §1 revocations and
 * introspections too) are shared by all its devices.
 * A request refused for what it is never counts against them; once a budget is spent, the
 * networks (address or /64, /24, /56, /48) that sent more than their share are refused, and a
 * device with a network of its own keeps its normal answers, within 2 s, every time.
 */

const fromAddress = (address: string) => ({ 'x-forwarded-for': address });

/** Starts at the top of a fixed window, so that everything a test sends falls in one. */
function topOfWindow(t: TestApp, seconds = 60) {
  t.clock.advance(seconds - ((t.clock.now().getTime() / 1000) % seconds));
}

describe("requests refused anyway never use an app's budget", () => {
  let t: TestApp;
  let app: { clientId: string };
  beforeAll(async () => {
    t = await startTestApp({
      env: { TRUST_PROXY: '127.0.0.1', RATE_LIMIT_TOKEN_PER_CLIENT: '5/60', RATE_LIMIT_DEVICE_CODE_PER_CLIENT: '3/60' },
    });
    app = await seedClient(t, { scopes: ['openid', 'profile'] });
  });
  afterAll(() => t.close());

  it('malformed, unsupported-grant, not-allowed-grant and unknown-client token requests from 200 addresses are refused, and a device of the app then polls with its normal answers', async () => {
    topOfWindow(t);
    const flow = await startDeviceFlow(t, app.clientId, {}, fromAddress(legitAddress()));
    const junk: Array<Record<string, string | string[]>> = [
      { grant_type: 'password', username: 'a', password: 'b', client_id: app.clientId },
      { grant_type: 'client_credentials', client_id: app.clientId },
      { grant_type: 'authorization_code', code: 'x', redirect_uri: 'https://example.test/', code_verifier: 'v'.repeat(43), client_id: app.clientId },
      { grant_type: DEVICE_GRANT, client_id: app.clientId },
      { grant_type: [DEVICE_GRANT, DEVICE_GRANT], device_code: 'da_dc_x', client_id: app.clientId },
      { grant_type: DEVICE_GRANT, device_code: 'da_dc_x', client_id: 'no-such-app' },
    ];
    const answers = await Promise.all(
      floodAddresses(200).map((address, i) =>
        t.app.inject({ method: 'POST', url: '/oauth/token', headers: { ...FORM, ...fromAddress(address) }, payload: form(junk[i % junk.length]!) }),
      ),
    );
    expect(answers.map((r) => r.statusCode).filter((s) => s === 429)).toEqual([]);
    expect(new Set(answers.map((r) => r.json().error))).toEqual(
      new Set(['unsupported_grant_type', 'unauthorized_client', 'invalid_request', 'invalid_client']),
    );
    const device = legitAddress();
    for (let i = 0; i < 5; i++) {
      t.clock.advance(5);
      const res = await t.app.inject({
        method: 'POST',
        url: '/oauth/token',
        headers: { ...FORM, ...fromAddress(device) },
        payload: form({ grant_type: DEVICE_GRANT, device_code: flow.device_code, client_id: app.clientId }),
      });
      expect(res.json().error).toBe('authorization_pending');
    }
  });

  it('device-code requests with a scope the app may not have, bad platform fields or an unknown client are refused, and devices of the app then get their codes', async () => {
    topOfWindow(t);
    const junk: Array<Record<string, string | string[]>> = [
      { client_id: app.clientId, scope: 'openid admin' },
      { client_id: app.clientId, scope: 'email' },
      { client_id: app.clientId, platform_name: 'TV\u0000' },
      { client_id: app.clientId, platform_description: ' ' },
      { client_id: app.clientId, platform_icon: 'http://example.test/icon.png' },
      { client_id: [app.clientId, app.clientId] },
      { client_id: 'no-such-app' },
    ];
    const answers = await Promise.all(
      floodAddresses(200).map((address, i) =>
        t.app.inject({ method: 'POST', url: '/oauth/device/code', headers: { ...FORM, ...fromAddress(address) }, payload: form(junk[i % junk.length]!) }),
      ),
    );
    expect(answers.map((r) => r.statusCode).filter((s) => s === 429)).toEqual([]);
    expect(new Set(answers.map((r) => r.json().error))).toEqual(new Set(['invalid_scope', 'invalid_request', 'invalid_client']));
    for (let i = 0; i < 3; i++) await startDeviceFlow(t, app.clientId, {}, fromAddress(legitAddress(i % 2 ? 4 : 6)));
  });
});

describe("a flood from 200 addresses in many networks cannot take an app's budget from its devices", () => {
  let t: TestApp;
  let app: { clientId: string };
  const TOKEN_BUDGET = 100;
  const DEVICE_CODE_BUDGET = 40;
  /** What each network keeps of a spent budget: 6 token requests (a device's polls over the test's half minute), 2 device codes. */
  const NETWORK_SHARE = 0.06;
  beforeAll(async () => {
    t = await startTestApp({
      env: {
        TRUST_PROXY: '127.0.0.1',
        // Per address: high enough that only the apps' budgets refuse the flood here.
        RATE_LIMIT_TOKEN_PER_IP: '1000/60',
        RATE_LIMIT_TOKEN_PER_CLIENT: `${TOKEN_BUDGET}/60`,
        RATE_LIMIT_DEVICE_CODE_PER_IP: '10/60',
        RATE_LIMIT_DEVICE_CODE_PER_CLIENT: `${DEVICE_CODE_BUDGET}/60`,
        RATE_LIMIT_NETWORK_SHARE: String(NETWORK_SHARE),
      },
    });
    app = await seedClient(t);
  });
  afterAll(() => t.close());

  const refused = (r: Response) => r.statusCode === 429 && r.json().error === 'temporarily_unavailable' && Number(r.headers['retry-after']) > 0;
  /** The widest network of an address that a budget weighs: its /48, or its IPv4 /24. */
  const widest = (address: string) => addressPrefixes(address).at(-1)!;
  /** What the flood may have had: the budget, and past it each of its networks' share. */
  const atMost = (budget: number, flood: string[]) => budget + new Set(flood.map(widest)).size * Math.max(1, Math.floor(budget * NETWORK_SHARE));

  const poll = (address: string, deviceCode: string) =>
    t.app.inject({
      method: 'POST',
      url: '/oauth/token',
      headers: { ...FORM, ...fromAddress(address) },
      payload: form({ grant_type: DEVICE_GRANT, device_code: deviceCode, client_id: app.clientId }),
    });

  it('junk polls: the heaviest networks are refused first, the rest once past their share, and a device polling at its interval from its own address gets authorization_pending within 2 s every time', async () => {
    topOfWindow(t);
    const flood = floodAddresses(200);
    const flow = await startDeviceFlow(t, app.clientId, {}, fromAddress(legitAddress()));
    const device = legitAddress();
    const waves: Response[][] = [];
    // Half a minute of polls at the interval (5 s), each beside a wave of one junk poll from every flood address.
    const senders = flood;
    for (let wave = 0; wave < 6; wave++) {
      t.clock.advance(5);
      const floodWave = sendAll(senders.map((address, i) => () => poll(address, `da_dc_junk${wave}-${i}`)));
      const { result, ms } = await timed(() => poll(device, flow.device_code));
      expect(result.json().error, `poll ${wave}`).toBe('authorization_pending');
      expect(ms, `poll ${wave}`).toBeLessThan(2000);
      waves.push(await floodWave);
    }
    // The budget was spent in the first wave, and the flood had no more than its networks' shares past it.
    const answered = waves.flat().filter((r) => !refused(r));
    expect(waves[0]!.filter((r) => !refused(r)).length).toBeGreaterThanOrEqual(TOKEN_BUDGET);
    expect(answered.every((r) => r.json().error === 'invalid_grant')).toBe(true);
    expect(answered.length).toBeLessThanOrEqual(atMost(TOKEN_BUDGET, flood));
    // The second wave: the heaviest networks (the /56 of forty /64s, the IPv4 /24s of twenty addresses) are all refused,
    // while the lighter /48s of two addresses each are still answered up to their share...
    const heavy = (address: string) => address.startsWith('10.') || addressPrefixes(address)[1] === addressPrefixes(flood[0]!)[1];
    const second = waves[1]!;
    expect(second.filter((r, i) => heavy(senders[i]!) && !refused(r))).toEqual([]);
    expect(second.filter((r, i) => !heavy(senders[i]!) && !refused(r)).length).toBeGreaterThan(0);
    // ...and past it (two addresses a /48, one poll each a wave), from the fourth wave on, every request of the flood is refused.
    for (const wave of waves.slice(3)) expect(wave.every(refused)).toBe(true);
  });

  it('junk device-code requests: the flood is refused once the budget is spent, and devices of the app, each from its own network, get their codes within 2 s every time', async () => {
    topOfWindow(t);
    const flood = floodAddresses(200);
    const waves: Response[][] = [];
    for (let wave = 0; wave < 3; wave++) {
      t.clock.advance(5);
      const floodWave = sendAll(
        flood.map(
          (address) => () =>
            t.app.inject({
              method: 'POST',
              url: '/oauth/device/code',
              headers: { ...FORM, ...fromAddress(address) },
              payload: form({ client_id: app.clientId }),
            }),
        ),
      );
      for (let tv = 0; tv < 3; tv++) {
        const { result, ms } = await timed(() =>
          t.app.inject({
            method: 'POST',
            url: '/oauth/device/code',
            headers: { ...FORM, ...fromAddress(legitAddress(tv % 2 ? 4 : 6)) },
            payload: form({ client_id: app.clientId }),
          }),
        );
        expect(result.statusCode, result.body).toBe(200);
        expect(result.json().device_code).toMatch(/^da_dc_/);
        expect(ms).toBeLessThan(2000);
      }
      waves.push(await floodWave);
    }
    const answered = waves.flat().filter((r) => !refused(r));
    expect(answered.every((r) => r.statusCode === 200)).toBe(true);
    // The flood had the budget but for the nine codes of the devices (three a wave)...
    expect(answered.length).toBeGreaterThanOrEqual(DEVICE_CODE_BUDGET - 9);
    // ...and past it no more than each of its networks' share.
    expect(answered.length).toBeLessThanOrEqual(atMost(DEVICE_CODE_BUDGET, flood));
    // The last wave: every one of the flood's networks has had its share.
    expect(waves[2]!.every(refused)).toBe(true);
  });
});

describe("revocation and introspection have an app's budget too, shared as the token endpoint's is", () => {
  let t: TestApp;
  let tv: TestClient;
  let rs: TestClient;
  let user: { userId: string };
  const BUDGET = 40;
  /** What each network keeps of a spent budget: 4 requests, a legitimate caller's over the test's four waves. */
  const NETWORK_SHARE = 0.1;
  const WAVES = 4;
  beforeAll(async () => {
    t = await startTestApp({
      env: {
        TRUST_PROXY: '127.0.0.1',
        RATE_LIMIT_REVOKE_PER_CLIENT: `${BUDGET}/60`,
        RATE_LIMIT_INTROSPECT_PER_CLIENT: `${BUDGET}/60`,
        RATE_LIMIT_NETWORK_SHARE: String(NETWORK_SHARE),
      },
    });
    tv = await seedClient(t);
    rs = await seedClient(t, { kind: 'web', type: 'confidential', name: 'Budget API', introspection: true });
    user = await seedUser(t);
  });
  afterAll(() => t.close());

  const refused = (r: Response) => r.statusCode === 429 && r.json().error === 'temporarily_unavailable' && Number(r.headers['retry-after']) > 0;
  const revokeFrom = (address: string, fields: Record<string, string>) =>
    t.app.inject({ method: 'POST', url: '/oauth/revoke', headers: { ...FORM, ...fromAddress(address) }, payload: form({ client_id: tv.clientId, ...fields }) });
  const introspectFrom = (address: string, token: string, secret = rs.clientSecret!) =>
    t.app.inject({
      method: 'POST',
      url: '/oauth/introspect',
      headers: { ...FORM, ...fromAddress(address), authorization: basicAuth(rs.clientId, secret) },
      payload: form({ token }),
    });

  it('requests refused anyway (no token, a wrong secret, an app that may not introspect) from 200 addresses never use it', async () => {
    const tokens = await signIn(t, tv, user.userId, 'openid offline_access');
    const bot = await seedClient(t, { kind: 'bot', type: 'confidential' });
    topOfWindow(t);
    const junk: Array<(address: string) => Promise<Response>> = [
      (address) => revokeFrom(address, {}),
      (address) => revokeFrom(address, { client_id: 'no-such-app', token: 'da_rt_x' }),
      (address) => introspectFrom(address, 'da_at_x', 'dacs_wrong'),
      (address) =>
        t.app.inject({
          method: 'POST',
          url: '/oauth/introspect',
          headers: { ...FORM, ...fromAddress(address), authorization: basicAuth(bot.clientId, bot.clientSecret!) },
          payload: form({ token: 'da_at_x' }),
        }),
      (address) =>
        t.app.inject({
          method: 'POST',
          url: '/oauth/introspect',
          headers: { ...FORM, ...fromAddress(address), authorization: basicAuth(rs.clientId, rs.clientSecret!) },
        }),
    ];
    const answers = await sendAll(floodAddresses(200).map((address, i) => () => junk[i % junk.length]!(address)));
    expect(answers.filter(refused)).toEqual([]);
    expect(new Set(answers.map((r) => r.json().error))).toEqual(new Set(['invalid_request', 'invalid_client', 'unauthorized_client']));
    // Both budgets are whole: the app's devices and the resource server get their normal answers.
    expect((await introspectFrom(legitAddress(), tokens.access_token)).json().active).toBe(true);
    expect((await revokeFrom(legitAddress(6), { token: tokens.refresh_token! })).statusCode).toBe(200);
    expect((await introspectFrom(legitAddress(), tokens.access_token)).json().active).toBe(false);
  });

  it('a flood of revocations from 200 addresses in many networks: once the budget is spent the flood is refused, and devices signing out, each from its own network, get 200 within 2 s and their grants end', async () => {
    const devices: TokenSet[] = [];
    for (let i = 0; i < WAVES; i++) devices.push(await signIn(t, tv, user.userId, 'openid offline_access'));
    topOfWindow(t);
    const flood = floodAddresses(200);
    const waves: Response[][] = [];
    for (let wave = 0; wave < WAVES; wave++) {
      t.clock.advance(5);
      const floodWave = sendAll(flood.map((address, i) => () => revokeFrom(address, { token: `da_rt_junk${wave}-${i}` })));
      const { result, ms } = await timed(() => revokeFrom(legitAddress(wave % 2 ? 4 : 6), { token: devices[wave]!.refresh_token! }));
      expect(result.statusCode, `sign-out ${wave}: ${result.body}`).toBe(200);
      expect(ms, `sign-out ${wave}`).toBeLessThan(2000);
      waves.push(await floodWave);
    }
    for (const device of devices) expect((await refresh(t, tv, device.refresh_token!)).json().error).toBe('invalid_grant');
    const answered = waves.flat().filter((r) => !refused(r));
    expect(answered.every((r) => r.statusCode === 200)).toBe(true);
    expect(answered.length).toBeGreaterThanOrEqual(BUDGET - WAVES);
    // Past the budget, each of the flood's networks had no more than its share, and then nothing.
    expect(answered.length).toBeLessThanOrEqual(atMost(flood));
    expect(waves.at(-1)!.every(refused)).toBe(true);
  });

  it("a flood of introspections with the resource server's own credentials from 200 addresses: refused once the budget is spent, while the resource server at its own address gets its normal answers within 2 s", async () => {
    const tokens = await signIn(t, tv, user.userId, 'openid');
    topOfWindow(t);
    const flood = floodAddresses(200);
    const server = legitAddress();
    const waves: Response[][] = [];
    for (let wave = 0; wave < WAVES; wave++) {
      t.clock.advance(5);
      const floodWave = sendAll(flood.map((address, i) => () => introspectFrom(address, `da_at_junk${wave}-${i}`)));
      const { result, ms } = await timed(() => introspectFrom(server, tokens.access_token));
      expect(result.json().active, `introspection ${wave}: ${result.body}`).toBe(true);
      expect(ms, `introspection ${wave}`).toBeLessThan(2000);
      waves.push(await floodWave);
    }
    const answered = waves.flat().filter((r) => !refused(r));
    expect(answered.every((r) => r.json().active === false)).toBe(true);
    expect(answered.length).toBeGreaterThanOrEqual(BUDGET - WAVES);
    expect(answered.length).toBeLessThanOrEqual(atMost(flood));
    expect(waves.at(-1)!.every(refused)).toBe(true);
  });

  /** What the flood may have had: the budget, and past it each of its networks' share. */
  function atMost(flood: string[]): number {
    return BUDGET + new Set(flood.map((address) => addressPrefixes(address).at(-1)!)).size * Math.max(1, Math.floor(BUDGET * NETWORK_SHARE));
  }
});
