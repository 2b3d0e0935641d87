import type { LightMyRequestResponse as Response } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FORM, basicAuth, form, seedClient, seedUser, startTestApp, type TestApp } from './helpers/app.js';
import { floodAddresses, legitAddress, sendAll, timed } from './helpers/flood.js';
import { signIn, type TokenSet } from './helpers/tokens.js';

/**
 * Issue 28 §2: userinfo, introspection and revocation have per-address limits like the token
 * endpoint's, counted before any other work. A flood from 200 addresses (one /56, many /48s,
 * IPv4 /24s) is refused past each address's limit; a legitimate caller elsewhere, sending at the
 * same moment, gets its normal answer within 2 s every time.
 */

const PER_ADDRESS = 2;
const FLOOD_ADDRESSES = 200;
const FLOOD_EACH = PER_ADDRESS + 1;

let t: TestApp;
let tv: { clientId: string; clientSecret: string | null };
let rs: { clientId: string; clientSecret: string | null };
let tokens: TokenSet;

beforeAll(async () => {
  t = await startTestApp({
    env: {
      TRUST_PROXY: '127.0.0.1',
      RATE_LIMIT_USERINFO_PER_IP: `${PER_ADDRESS}/60`,
      RATE_LIMIT_INTROSPECT_PER_IP: `${PER_ADDRESS}/60`,
      RATE_LIMIT_REVOKE_PER_IP: `${PER_ADDRESS}/60`,
    },
  });
  tv = await seedClient(t, { kind: 'tv' });
  rs = await seedClient(t, { kind: 'web', type: 'confidential', name: 'Photo API', introspection: true });
  const user = await seedUser(t);
  tokens = await signIn(t, tv, user.userId, 'openid profile email offline_access');
});
afterAll(() => t.close());

type Endpoint = 'userinfo' | 'introspect' | 'revoke';

/** One request to the endpoint from `address`: the legitimate one with a live token, the flood's with junk. */
function send(endpoint: Endpoint, address: string, token: string): Promise<Response> {
  const from = { 'x-forwarded-for': address };
  switch (endpoint) {
    case 'userinfo':
      return t.app.inject({ method: 'GET', url: '/oauth/userinfo', headers: { ...from, authorization: `Bearer ${token}` } });
    case 'introspect':
      return t.app.inject({
        method: 'POST',
        url: '/oauth/introspect',
        headers: { ...FORM, ...from, authorization: basicAuth(rs.clientId, rs.clientSecret!) },
        payload: form({ token }),
      });
    case 'revoke':
      return t.app.inject({ method: 'POST', url: '/oauth/revoke', headers: { ...FORM, ...from }, payload: form({ token, client_id: tv.clientId }) });
  }
}

/** What the legitimate caller must get: its normal answer. */
function expectNormalAnswer(endpoint: Endpoint, res: Response) {
  expect(res.statusCode, res.body).toBe(200);
  if (endpoint === 'userinfo') expect(res.json().sub).toBeTruthy();
  if (endpoint === 'introspect') expect(res.json().active).toBe(true);
}

describe.each<Endpoint>(['userinfo', 'introspect', 'revoke'])('per-address limit at /oauth/%s', (endpoint) => {
  it('one address past its limit gets 429 temporarily_unavailable with Retry-After; another address is unaffected', async () => {
    t.clock.advance(60);
    const address = legitAddress();
    const answers = [];
    for (let i = 0; i < PER_ADDRESS + 1; i++) answers.push(await send(endpoint, address, `junk-${i}`));
    expect(answers.slice(0, PER_ADDRESS).every((r) => r.statusCode !== 429)).toBe(true);
    const refused = answers[PER_ADDRESS]!;
    expect(refused.statusCode).toBe(429);
    expect(refused.json()).toMatchObject({ error: 'temporarily_unavailable', error_description: expect.stringContaining('retry after') });
    expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
    expect(refused.headers['cache-control']).toBe('no-store');
    // Another address is not affected.
    expect((await send(endpoint, legitAddress(6), 'junk')).statusCode).not.toBe(429);
  });

  it(`a flood from ${FLOOD_ADDRESSES} addresses in many prefixes is refused past each address's limit while a legitimate caller elsewhere gets its normal answer within 2 s every time`, async () => {
    t.clock.advance(60);
    const flood = floodAddresses(FLOOD_ADDRESSES);
    const legit = legitAddress(6);
    const answered: Response[] = [];
    const legitAnswers: Array<{ result: Response; ms: number }> = [];
    // Revocation answers 200 whatever the token (RFC 7009 §2.2); revoking an access token here leaves the grant alone.
    const token = tokens.access_token;
    for (let round = 0; round < FLOOD_EACH; round++) {
      const wave = sendAll(flood.map((address) => () => send(endpoint, address, `junk-${round}-${address}`)));
      if (round < PER_ADDRESS) legitAnswers.push(await timed(() => send(endpoint, legit, token)));
      answered.push(...(await wave));
    }
    for (const { result, ms } of legitAnswers) {
      expectNormalAnswer(endpoint, result);
      expect(ms).toBeLessThan(2000);
    }
    // Every flood address was heard exactly up to its limit, then refused.
    expect(answered.filter((r) => r.statusCode !== 429)).toHaveLength(FLOOD_ADDRESSES * PER_ADDRESS);
    expect(answered.filter((r) => r.statusCode === 429)).toHaveLength(FLOOD_ADDRESSES * (FLOOD_EACH - PER_ADDRESS));
  });
});
