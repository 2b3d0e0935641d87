import { exportJWK } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { epochSeconds } from '../../src/lib/clock.js';
import { hashOpaque } from '../../src/oauth/opaque-tokens.js';
import { FORM, form, seedClient, seedUser, startTestApp, type TestApp } from '../helpers/app.js';
import { decide, poll, requestDeviceCode, startDeviceFlow } from '../helpers/device.js';
import { dpopKey, proofFor, unsignedProof, type DpopKey, type ProofOptions } from '../helpers/dpop.js';
import { grantOf, introspection, refresh, userinfo, type TestClient, type TokenSet } from '../helpers/tokens.js';
import { signedInBrowser } from '../helpers/browser.js';
import { answerAtApp, authorizeUrl, codeFor, pkcePair, REDIRECT_URI, seedWebApp, type WebApp } from '../helpers/web-app.js';

/**
 * RFC 9449 through the endpoints: what binds a request or a grant to a key, what a bound one then
 * refuses, and every check of a proof, each refused on its own.
 */

let t: TestApp;
let tv: TestClient;
let rs: TestClient;
let user: { userId: string };
let key: DpopKey;
let otherKey: DpopKey;

/** A proof dated by the app's clock (which tests move), correct unless an option says otherwise. */
const proof = (k: DpopKey, options: ProofOptions = {}) => proofFor(k, { iat: epochSeconds(t.clock.now()), ...options });
const withProof = async (k: DpopKey, options: ProofOptions = {}) => ({ dpop: await proof(k, options) });

beforeAll(async () => {
  t = await startTestApp();
  tv = await seedClient(t);
  rs = await seedClient(t, { kind: 'web', type: 'confidential', name: 'Photo API' });
  user = await seedUser(t);
  key = await dpopKey();
  otherKey = await dpopKey();
});
afterAll(() => t.close());

async function requestStatus(deviceCode: string) {
  return t.deps.db
    .selectFrom('device_requests')
    .select(['status', 'last_polled_at', 'interval_seconds', 'dpop_jkt'])
    .where('device_code_hash', '=', hashOpaque(deviceCode))
    .executeTakeFirstOrThrow();
}

/** A device flow bound to `k` at its start, approved, and redeemed with a proof of `k`. */
async function boundSignIn(k: DpopKey): Promise<TokenSet> {
  const flow = await startDeviceFlow(t, tv.clientId, { scope: 'openid profile offline_access' }, await withProof(k, { htu: '/oauth/device/code' }));
  await decide(t, flow.user_code, user.userId, 'approve');
  t.clock.advance(flow.interval);
  const res = await poll(t, tv.clientId, flow.device_code, await withProof(k));
  expect(res.statusCode, res.body).toBe(200);
  return res.json();
}

const dpopUserinfo = async (token: string, k: DpopKey, options: ProofOptions = {}) =>
  t.app.inject({
    method: 'GET',
    url: '/oauth/userinfo',
    headers: { authorization: `DPoP ${token}`, dpop: await proof(k, { htm: 'GET', htu: '/oauth/userinfo', accessToken: token, ...options }) },
  });

describe('device flow bound at its start (draft-parecki-oauth-dpop-device-flow)', () => {
  it('a proof at device authorization binds the request: the poll with the key gets DPoP tokens, cnf.jkt in introspection', async () => {
    const tokens = await boundSignIn(key);
    expect(tokens.token_type).toBe('DPoP');
    expect((await grantOf(t, tokens.access_token)).dpop_jkt).toBe(key.jkt);
    expect(await introspection(t, rs, tokens.access_token)).toMatchObject({ active: true, token_type: 'DPoP', cnf: { jkt: key.jkt } });
  });

  it.each([
    ['pending', null],
    ['approved', 'approve'],
    ['denied', 'deny'],
  ] as const)('every poll of a bound request without its key gets the same invalid_dpop_proof and records nothing (%s)', async (_state, choice) => {
    const flow = await startDeviceFlow(t, tv.clientId, {}, await withProof(key, { htu: '/oauth/device/code' }));
    if (choice) await decide(t, flow.user_code, user.userId, choice);
    const before = await requestStatus(flow.device_code);
    const answers = [await poll(t, tv.clientId, flow.device_code), await poll(t, tv.clientId, flow.device_code, await withProof(otherKey))];
    for (const res of answers) {
      expect(res.statusCode).toBe(400);
      expect(res.json()).toEqual({
        error: 'invalid_dpop_proof',
        error_description: 'this device_code is bound to a DPoP key; every poll must carry a proof of that key',
      });
    }
    // No poll time, no slow_down, no redemption: the request is as the device left it.
    expect(await requestStatus(flow.device_code)).toEqual(before);
  });

  it('an unbound request whose issuing poll carries a proof gets tokens bound to that key', async () => {
    const flow = await startDeviceFlow(t, tv.clientId, { scope: 'openid offline_access' });
    expect((await requestStatus(flow.device_code)).dpop_jkt).toBeNull();
    await decide(t, flow.user_code, user.userId, 'approve');
    t.clock.advance(flow.interval);
    const res = await poll(t, tv.clientId, flow.device_code, await withProof(otherKey));
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().token_type).toBe('DPoP');
    expect((await grantOf(t, res.json().access_token)).dpop_jkt).toBe(otherKey.jkt);
  });

  it('without any proof the flow stays Bearer, as before', async () => {
    const flow = await startDeviceFlow(t, tv.clientId, { scope: 'openid' });
    await decide(t, flow.user_code, user.userId, 'approve');
    t.clock.advance(flow.interval);
    const res = await poll(t, tv.clientId, flow.device_code);
    expect(res.json().token_type).toBe('Bearer');
    expect(await introspection(t, rs, res.json().access_token)).not.toHaveProperty('cnf');
  });
});

describe('refresh of a bound grant (RFC 9449 §5)', () => {
  it('needs a proof of the same key: without one, or with another key, it neither rotates nor revokes', async () => {
    const tokens = await boundSignIn(key);
    const grantBefore = await grantOf(t, tokens.refresh_token!);
    for (const headers of [{}, await withProof(otherKey)]) {
      const res = await t.app.inject({
        method: 'POST',
        url: '/oauth/token',
        headers: { ...FORM, ...headers },
        payload: form({ grant_type: 'refresh_token', refresh_token: tokens.refresh_token!, client_id: tv.clientId }),
      });
      expect(res.statusCode).toBe(400);
      expect(res.json().error).toBe('invalid_dpop_proof');
    }
    const grantAfter = await grantOf(t, tokens.refresh_token!);
    expect(grantAfter.revoked_at).toBeNull();
    expect(Buffer.from(grantAfter.current_refresh_hash!)).toEqual(Buffer.from(grantBefore.current_refresh_hash!));
    // The rightful holder then refreshes as if nothing had happened.
    const res = await t.app.inject({
      method: 'POST',
      url: '/oauth/token',
      headers: { ...FORM, ...(await withProof(key)) },
      payload: form({ grant_type: 'refresh_token', refresh_token: tokens.refresh_token!, client_id: tv.clientId }),
    });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().token_type).toBe('DPoP');
    expect(await introspection(t, rs, res.json().access_token)).toMatchObject({ cnf: { jkt: key.jkt } });
  });

  it('a retried refresh of a bound grant (REFRESH_RETRY_WINDOW) needs the key too, and gets the lost DPoP answer again', async () => {
    const tokens = await boundSignIn(key);
    const send = async (headers: Record<string, string>) =>
      t.app.inject({
        method: 'POST',
        url: '/oauth/token',
        headers: { ...FORM, ...headers },
        payload: form({ grant_type: 'refresh_token', refresh_token: tokens.refresh_token!, client_id: tv.clientId }),
      });
    const first = await send(await withProof(key));
    expect(first.statusCode, first.body).toBe(200);
    const withoutKey = await send({});
    expect(withoutKey.json().error).toBe('invalid_dpop_proof');
    const retried = await send(await withProof(key));
    expect(retried.statusCode, retried.body).toBe(200);
    expect(retried.json()).toMatchObject({ token_type: 'DPoP', access_token: first.json().access_token, refresh_token: first.json().refresh_token });
    expect((await grantOf(t, tokens.refresh_token!)).revoked_at).toBeNull();
  });

  it('an unbound grant refreshed with a proof gets a bound access token; the grant stays unbound', async () => {
    const flow = await startDeviceFlow(t, tv.clientId, { scope: 'openid offline_access' });
    await decide(t, flow.user_code, user.userId, 'approve');
    t.clock.advance(flow.interval);
    const first = (await poll(t, tv.clientId, flow.device_code)).json() as TokenSet;
    const res = await t.app.inject({
      method: 'POST',
      url: '/oauth/token',
      headers: { ...FORM, ...(await withProof(key)) },
      payload: form({ grant_type: 'refresh_token', refresh_token: first.refresh_token!, client_id: tv.clientId }),
    });
    expect(res.json().token_type).toBe('DPoP');
    expect(await introspection(t, rs, res.json().access_token)).toMatchObject({ cnf: { jkt: key.jkt } });
    expect((await grantOf(t, res.json().refresh_token)).dpop_jkt).toBeNull();
    expect((await refresh(t, tv, res.json().refresh_token)).json().token_type).toBe('Bearer');
  });
});

describe('userinfo with a bound token (RFC 9449 §7)', () => {
  let tokens: TokenSet;
  beforeAll(async () => {
    tokens = await boundSignIn(key);
  });

  it('answers Authorization: DPoP with a proof of the key that names the token (ath)', async () => {
    const res = await dpopUserinfo(tokens.access_token, key);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().sub).toBe(user.userId);
  });

  it('refuses the bound token as Bearer with a DPoP challenge', async () => {
    const res = await userinfo(t, tokens.access_token);
    expect(res.statusCode).toBe(401);
    expect(res.json().error).toBe('invalid_token');
    expect(res.headers['www-authenticate']).toMatch(/^DPoP realm="device-auth", error="invalid_token".*algs="ES256 /);
  });

  it.each([
    ['another key', async () => dpopUserinfo(tokens.access_token, otherKey), 'invalid_token'],
    ['no ath', async () => dpopUserinfo(tokens.access_token, key, { accessToken: undefined }), 'invalid_dpop_proof'],
    ['the ath of another token', async () => dpopUserinfo(tokens.access_token, key, { accessToken: 'da_at_other' }), 'invalid_dpop_proof'],
    ['htm POST on a GET', async () => dpopUserinfo(tokens.access_token, key, { htm: 'POST' }), 'invalid_dpop_proof'],
    [
      'no proof at all',
      async () => t.app.inject({ method: 'GET', url: '/oauth/userinfo', headers: { authorization: `DPoP ${tokens.access_token}` } }),
      'invalid_dpop_proof',
    ],
  ])('refuses %s: 401 %s with WWW-Authenticate: DPoP', async (_case, send, error) => {
    const res = await send();
    expect(res.statusCode).toBe(401);
    expect(res.json().error).toBe(error);
    expect(res.headers['www-authenticate']).toContain(`DPoP realm="device-auth", error="${error}"`);
  });

  it('refuses an unbound token presented under the DPoP scheme, even with a valid proof', async () => {
    const flow = await startDeviceFlow(t, tv.clientId, { scope: 'openid' });
    await decide(t, flow.user_code, user.userId, 'approve');
    t.clock.advance(flow.interval);
    const bearer = (await poll(t, tv.clientId, flow.device_code)).json() as TokenSet;
    const res = await dpopUserinfo(bearer.access_token, key);
    expect(res.statusCode).toBe(401);
    expect(res.json().error).toBe('invalid_token');
    expect((await userinfo(t, bearer.access_token)).statusCode).toBe(200);
  });
});

describe('every check of a proof (RFC 9449 §4.3), at the device authorization endpoint', () => {
  const deviceCode = (headers: Record<string, string>) => requestDeviceCode(t, { client_id: tv.clientId }, headers);
  const at = '/oauth/device/code';
  const now = () => epochSeconds(t.clock.now());

  it('a correct proof is accepted', async () => {
    expect((await deviceCode(await withProof(key, { htu: at }))).statusCode).toBe(200);
  });

  // Each case is refused by its own check: the description names it.
  it.each<[string, () => Promise<string>, RegExp]>([
    ['typ JWT', () => proof(key, { htu: at, typ: 'JWT' }), /typ dpop\+jwt/],
    ['alg none', async () => unsignedProof('none', key.jwk, at), /signed with one of/],
    ['alg HS256', async () => unsignedProof('HS256', key.jwk, at), /signed with one of/],
    ['a private jwk', async () => proof(key, { htu: at, jwk: await exportJWK(key.privateKey) }), /without private parts/],
    ['a symmetric jwk', () => proof(key, { htu: at, jwk: { kty: 'oct', k: 'AAAA' } }), /without private parts/],
    ['htm GET', () => proof(key, { htu: at, htm: 'GET' }), /htm/],
    ['htu of the token endpoint', () => proof(key, { htu: '/oauth/token' }), /htu/],
    ['htu on another host', () => proof(key, { htu: 'https://evil.example/oauth/device/code' }), /htu/],
    ['iat 61 s old', () => proof(key, { htu: at, iat: now() - 61 }), /iat/],
    ['iat 61 s ahead', () => proof(key, { htu: at, iat: now() + 61 }), /iat/],
    ['no jti', () => proof(key, { htu: at, jti: null }), /jti/],
    ['a jti of 257 characters', () => proof(key, { htu: at, jti: 'j'.repeat(257) }), /jti/],
    [
      'a signature by another key',
      async () => {
        const [header, payload] = (await proof(key, { htu: at })).split('.');
        const signature = (await proof(otherKey, { htu: at })).split('.')[2];
        return `${header}.${payload}.${signature}`;
      },
      /signature/,
    ],
    ['two proofs in one header', async () => `${await proof(key, { htu: at })}, ${await proof(key, { htu: at })}`, /exactly one/],
    ['not a JWS', async () => 'not-a-proof', /compact JWS/],
    ['5000 characters', async () => `${'a'.repeat(2500)}.${'b'.repeat(2499)}.c`, /longer than/],
  ])('%s is refused: 400 invalid_dpop_proof', async (_case, make, why) => {
    const res = await deviceCode({ dpop: await make() });
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json().error).toBe('invalid_dpop_proof');
    expect(res.json().error_description).toMatch(why);
  });

  it('htu is compared without query or fragment, after normalisation (RFC 9449 §4.3)', async () => {
    expect((await deviceCode(await withProof(key, { htu: 'HTTP://LOCALHOST:3000/oauth/device/code?x=1#y' }))).statusCode).toBe(200);
  });

  it('an EdDSA proof is accepted', async () => {
    const ed = await dpopKey('EdDSA');
    expect((await deviceCode(await withProof(ed, { htu: at }))).statusCode).toBe(200);
  });

  it('a replayed proof is refused', async () => {
    const once = await proof(key, { htu: at });
    expect((await deviceCode({ dpop: once })).statusCode).toBe(200);
    const again = await deviceCode({ dpop: once });
    expect(again.statusCode).toBe(400);
    expect(again.json().error_description).toMatch(/already used/);
  });

  it('one proof sent 20 times at once is accepted exactly once', async () => {
    const once = await proof(key, { htu: at });
    const answers = await Promise.all(Array.from({ length: 20 }, () => deviceCode({ dpop: once })));
    expect(answers.map((r) => r.statusCode).sort()).toEqual([200, ...Array<number>(19).fill(400)]);
  });

  it('hostile bytes in the DPoP header are a clear 400, never a 500, and are not echoed', async () => {
    for (const value of ['\u00ff\u00fe', 'a.b.\u00e9', '%00.%00.%00', 'e30.e30.', '_-_.e30.AA', 'eyJhbGciOiJFUzI1NiJ9.e30.AA']) {
      const res = await deviceCode({ dpop: value });
      expect(res.statusCode, value).toBe(400);
      expect(res.json().error).toBe('invalid_dpop_proof');
      expect(res.body).not.toContain(value);
    }
  });
});

describe('the authorization-code grant (RFC 9449 §10)', () => {
  let web: WebApp;
  beforeAll(async () => {
    web = await seedWebApp(t);
  });

  async function codeOf(extra: Record<string, string> = {}) {
    const pkce = pkcePair();
    const browser = await signedInBrowser(t, await seedUser(t));
    const params = await codeFor(browser, authorizeUrl(web, pkce.challenge, extra));
    return { code: params.get('code') ?? '', verifier: pkce.verifier };
  }
  const redeem = (code: { code: string; verifier: string }, headers: Record<string, string> = {}) =>
    t.app.inject({
      method: 'POST',
      url: '/oauth/token',
      headers: { ...FORM, ...headers },
      payload: form({ grant_type: 'authorization_code', client_id: web.clientId, redirect_uri: REDIRECT_URI, code: code.code, code_verifier: code.verifier }),
    });

  it('a code requested with dpop_jkt is redeemed only with a proof of that key, into DPoP tokens', async () => {
    const bound = await codeOf({ dpop_jkt: key.jkt });
    const res = await redeem(bound, await withProof(key));
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().token_type).toBe('DPoP');
    expect(await introspection(t, rs, res.json().access_token)).toMatchObject({ cnf: { jkt: key.jkt } });
  });

  it.each([
    ['without a proof', async () => ({})],
    ['with a proof of another key', async () => withProof(otherKey)],
  ])('a code bound with dpop_jkt is refused %s, and spent', async (_case, headers) => {
    const bound = await codeOf({ dpop_jkt: key.jkt });
    const refused = await redeem(bound, await headers());
    expect(refused.statusCode).toBe(400);
    expect(refused.json().error).toBe('invalid_grant');
    expect((await redeem(bound, await withProof(key))).statusCode).toBe(400);
  });

  it('without dpop_jkt, a proof at the token endpoint binds the tokens', async () => {
    const res = await redeem(await codeOf(), await withProof(otherKey));
    expect(res.json().token_type).toBe('DPoP');
    expect(await introspection(t, rs, res.json().access_token)).toMatchObject({ cnf: { jkt: otherKey.jkt } });
  });

  it.each(['short', `${'A'.repeat(42)}=`, `${'A'.repeat(42)}\u0000`, `${'é'.repeat(43)}`, 'A'.repeat(5000)])(
    'a dpop_jkt that is not a thumbprint goes back as invalid_request (%#)',
    async (jkt) => {
      const pkce = pkcePair();
      const browser = await signedInBrowser(t, await seedUser(t));
      const res = await browser.get(authorizeUrl(web, pkce.challenge, { dpop_jkt: jkt }));
      expect(res.statusCode).toBeLessThan(500);
      if (res.statusCode === 303) expect(answerAtApp(res).get('error')).toBe('invalid_request');
      else expect(res.statusCode).toBe(400);
    },
  );
});

describe('an app registered to require DPoP (dpop_bound_access_tokens)', () => {
  it('gets tokens only with a proof', async () => {
    const strict = await seedClient(t, { dpopBoundAccessTokens: true });
    const flow = await startDeviceFlow(t, strict.clientId, { scope: 'openid' });
    await decide(t, flow.user_code, user.userId, 'approve');
    t.clock.advance(flow.interval);
    const without = await poll(t, strict.clientId, flow.device_code);
    expect(without.statusCode).toBe(400);
    expect(without.json()).toMatchObject({ error: 'invalid_dpop_proof', error_description: 'this app is registered to use DPoP: send a DPoP proof' });
    const withKey = await poll(t, strict.clientId, flow.device_code, await withProof(key));
    expect(withKey.statusCode, withKey.body).toBe(200);
    expect(withKey.json().token_type).toBe('DPoP');
  });
});

describe('server nonces (DPOP_NONCES=true, RFC 9449 §8 and §9)', () => {
  let n: TestApp;
  let second: TestApp;
  let client: TestClient;
  const nonceProof = (k: DpopKey, options: ProofOptions = {}) => proofFor(k, { iat: epochSeconds(n.clock.now()), htu: '/oauth/device/code', ...options });
  const deviceCode = (app: TestApp, dpop: string) => requestDeviceCode(app, { client_id: client.clientId }, { dpop });

  beforeAll(async () => {
    n = await startTestApp({ env: { DPOP_NONCES: 'true' } });
    // A second instance on the same database: a nonce of one is good at the other.
    second = await startTestApp({ env: { DPOP_NONCES: 'true' }, database: n.database });
    // Both instances at one time, as servers are: a nonce period boundary between the two starts
    // would otherwise give each a different current nonce.
    second.clock.advance((n.clock.now().getTime() - second.clock.now().getTime()) / 1000);
    client = await seedClient(n);
  });
  afterAll(async () => {
    await second.close();
    await n.close();
  });

  it('a proof without a nonce gets 400 use_dpop_nonce with DPoP-Nonce; with it, 200 and a fresh one; any instance accepts it', async () => {
    const refused = await deviceCode(n, await nonceProof(key));
    expect(refused.statusCode).toBe(400);
    expect(refused.json().error).toBe('use_dpop_nonce');
    const nonce = String(refused.headers['dpop-nonce']);
    expect(nonce).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const accepted = await deviceCode(second, await nonceProof(key, { nonce }));
    expect(accepted.statusCode, accepted.body).toBe(200);
    expect(accepted.headers['dpop-nonce']).toBe(nonce);
  });

  it('one proof sent 10 times at once to each of two instances is accepted exactly once', async () => {
    const nonce = String((await deviceCode(n, await nonceProof(key))).headers['dpop-nonce']);
    const once = await nonceProof(key, { nonce });
    const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => deviceCode(i % 2 === 0 ? n : second, once)));
    expect(answers.map((r) => r.statusCode).sort()).toEqual([200, ...Array<number>(19).fill(400)]);
  });

  it('a nonce two periods old is refused with a new one', async () => {
    const nonce = String((await deviceCode(n, await nonceProof(key))).headers['dpop-nonce']);
    n.clock.advance(2 * n.config.dpop.noncePeriodSeconds);
    const stale = await deviceCode(n, await nonceProof(key, { nonce }));
    expect(stale.statusCode).toBe(400);
    expect(stale.json().error).toBe('use_dpop_nonce');
    expect(stale.headers['dpop-nonce']).not.toBe(nonce);
  });

  it('userinfo asks for a nonce with 401 and WWW-Authenticate: DPoP error="use_dpop_nonce"', async () => {
    const res = await n.app.inject({
      method: 'GET',
      url: '/oauth/userinfo',
      headers: { authorization: 'DPoP da_at_x', dpop: await nonceProof(key, { htm: 'GET', htu: '/oauth/userinfo', accessToken: 'da_at_x' }) },
    });
    expect(res.statusCode).toBe(401);
    expect(res.headers['www-authenticate']).toContain('DPoP realm="device-auth", error="use_dpop_nonce"');
    expect(res.headers['dpop-nonce']).toMatch(/^[A-Za-z0-9_-]{43}$/);
  });
});

describe('used proofs in Redis (REDIS_URL), shared by two instances', () => {
  let a: TestApp;
  let b: TestApp;
  let client: TestClient;
  beforeAll(async () => {
    a = await startTestApp({ env: { REDIS_URL: 'redis://127.0.0.1:6379' } });
    b = await startTestApp({ env: { REDIS_URL: 'redis://127.0.0.1:6379' }, database: a.database });
    client = await seedClient(a);
  });
  afterAll(async () => {
    await b.close();
    await a.close();
  });

  it('one proof sent 20 times at once, half to each instance, is accepted exactly once (SET NX)', async () => {
    const once = await proofFor(key, { iat: epochSeconds(a.clock.now()), htu: '/oauth/device/code' });
    const answers = await Promise.all(
      Array.from({ length: 20 }, (_, i) => requestDeviceCode(i % 2 === 0 ? a : b, { client_id: client.clientId }, { dpop: once })),
    );
    expect(answers.map((r) => r.statusCode).sort()).toEqual([200, ...Array<number>(19).fill(400)]);
    // Nothing went to the database's table: Redis holds them.
    expect(await a.deps.db.selectFrom('dpop_proofs').select('proof_hash').execute()).toEqual([]);
  });
});

it('a used proof is purged once no clock could accept it again', async () => {
  await requestDeviceCode(t, { client_id: tv.clientId }, await withProof(key, { htu: '/oauth/device/code' }));
  const stored = async () =>
    Number(
      (
        await t.deps.db
          .selectFrom('dpop_proofs')
          .select((eb) => eb.fn.countAll().as('n'))
          .executeTakeFirstOrThrow()
      ).n,
    );
  expect(await stored()).toBeGreaterThan(0);
  t.clock.advance(2 * t.config.dpop.proofWindowSeconds + 1);
  const purged = await t.deps.housekeeping.run();
  expect(purged.dpopProofs).toBeGreaterThan(0);
  expect(await stored()).toBe(0);
});
