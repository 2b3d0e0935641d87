import { randomBytes } from 'node:crypto';
import { calculateJwkThumbprint, exportJWK, generateKeyPair } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { epochSeconds } from '../../src/lib/clock.js';
import { TOKEN_PREFIX } from '../../src/oauth/opaque-tokens.js';
import { FORM, form, seedClient, seedUser, startTestApp, type TestApp } from '../helpers/app.js';
import { signedInBrowser } from '../helpers/browser.js';
import { decide, DEVICE_GRANT, poll, requestDeviceCode, startDeviceFlow } from '../helpers/device.js';
import { boundDeviceTokens, dpopKey, proofFor, type DpopKey, type ProofOptions } from '../helpers/dpop.js';
import { grantOf, type TestClient, type TokenSet } from '../helpers/tokens.js';
import { authorizeUrl, codeFor, pkcePair, REDIRECT_URI, seedWebApp, type WebApp } from '../helpers/web-app.js';

/**
 * Issue 28 §2: no DPoP proof costs the server much more than an ordinary one, and a proof is
 * recorded as used only once it was used for something that needed it.
 */

let t: TestApp;
let tv: TestClient;
let user: { userId: string };
let es256: DpopKey;
let rsa4096: DpopKey;

const proof = (k: DpopKey, options: ProofOptions = {}) => proofFor(k, { iat: epochSeconds(t.clock.now()), ...options });
const at = '/oauth/device/code';
const b64 = (bytes: Buffer) => bytes.toString('base64url');

const boundTokens = (k: DpopKey) => boundDeviceTokens(t, tv.clientId, user.userId, k, 'openid');

const userinfoWith = (token: string, dpop: string) =>
  t.app.inject({ method: 'GET', url: '/oauth/userinfo', headers: { authorization: `DPoP ${token}`, dpop } });
const userinfoProof = (k: DpopKey, token: string, options: ProofOptions = {}) =>
  proof(k, { htm: 'GET', htu: '/oauth/userinfo', accessToken: token, ...options });
const storedProofs = async () =>
  Number(
    (
      await t.deps.db
        .selectFrom('dpop_proofs')
        .select((eb) => eb.fn.countAll().as('n'))
        .executeTakeFirstOrThrow()
    ).n,
  );

beforeAll(async () => {
  t = await startTestApp();
  tv = await seedClient(t);
  user = await seedUser(t);
  es256 = await dpopKey('ES256');
  const pair = await generateKeyPair('RS256', { modulusLength: 4096, extractable: true });
  const jwk = await exportJWK(pair.publicKey);
  rsa4096 = { alg: 'RS256', privateKey: pair.privateKey, jwk, jkt: await calculateJwkThumbprint(jwk, 'sha256') };
}, 60_000);
afterAll(() => t.close());

describe('DPoP proof keys of a bounded cost', () => {
  it.each([
    [
      'an RSA key with a 3,072-bit public exponent',
      () => ({ e: b64(Buffer.concat([Buffer.from([0x80]), randomBytes(382), Buffer.from([1])])) }),
      /exponent 65537/,
    ],
    ['an RSA key with exponent 3', () => ({ e: 'Aw' }), /exponent 65537/],
    ['an RSA key with a 1,024-bit modulus', () => ({ n: b64(Buffer.concat([Buffer.from([0xc1]), randomBytes(127)])) }), /2048 to 4096 bits/],
    ['an RSA key with an 8,192-bit modulus', () => ({ n: b64(Buffer.concat([Buffer.from([0xc1]), randomBytes(1023)])) }), /2048 to 4096 bits/],
    ['an RSA key without a modulus', () => ({ n: undefined }), /2048 to 4096 bits/],
  ])('%s is refused before any signature check: 400 invalid_dpop_proof', async (_case, change, why) => {
    const rsa = await dpopKey('RS256');
    const res = await requestDeviceCode(t, { client_id: tv.clientId }, { dpop: await proof(rsa, { htu: at, jwk: { ...rsa.jwk, ...change() } }) });
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json().error).toBe('invalid_dpop_proof');
    expect(res.json().error_description).toMatch(why);
  });

  it('an RSA key of 2,048 or 4,096 bits with exponent 65537 is accepted', async () => {
    for (const k of [await dpopKey('RS256'), rsa4096]) {
      const res = await requestDeviceCode(t, { client_id: tv.clientId }, { dpop: await proof(k, { htu: at }) });
      expect(res.statusCode, res.body).toBe(200);
    }
  });

  it.each([
    ['an ES256 proof with a P-384 key', 'ES384', 'ES256', /curve P-256/],
    ['an ES384 proof with a P-256 key', 'ES256', 'ES384', /curve P-384/],
    ['an RS256 proof with an EC key', 'ES256', 'RS256', /kty RSA/],
    ['an EdDSA proof with an EC key', 'ES256', 'EdDSA', /kty OKP/],
  ])("%s is refused: the key must be of its alg's type and curve", async (_case, keyAlg, alg, why) => {
    const k = await dpopKey(keyAlg);
    const res = await requestDeviceCode(
      t,
      { client_id: tv.clientId },
      { dpop: await proof({ ...k, alg: keyAlg }, { htu: at, jwk: k.jwk }).then((p) => swapAlg(p, alg)) },
    );
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json().error_description).toMatch(why);
  });

  it('the claims are checked before the signature: a wrong htm, htu or iat with a bad signature is refused for the claim', async () => {
    for (const [options, why] of [
      [{ htm: 'GET' }, /htm/],
      [{ htu: '/oauth/token' }, /htu/],
      [{ iat: epochSeconds(t.clock.now()) - 3600 }, /iat/],
    ] as const) {
      const [header, payload] = (await proof(rsa4096, { htu: at, ...options })).split('.');
      const res = await requestDeviceCode(t, { client_id: tv.clientId }, { dpop: `${header}.${payload}.${'A'.repeat(683)}` });
      expect(res.statusCode).toBe(400);
      expect(res.json().error_description).toMatch(why);
    }
  });
});

/** Replaces the alg in a proof's header (its signature then no longer matters: the key's shape is refused first). */
function swapAlg(proofText: string, alg: string): string {
  const [header, payload, signature] = proofText.split('.');
  const decoded = JSON.parse(Buffer.from(header!, 'base64url').toString('utf8')) as Record<string, unknown>;
  return `${Buffer.from(JSON.stringify({ ...decoded, alg })).toString('base64url')}.${payload}.${signature}`;
}

describe('used proofs are recorded only when the proof was needed (issue 28 §2)', () => {
  it("200 userinfo requests with valid proofs of the sender's own key and a junk token write no row", async () => {
    const before = await storedProofs();
    const junk = 'da_at_junk';
    const proofs = await Promise.all(Array.from({ length: 200 }, () => userinfoProof(es256, junk)));
    for (let i = 0; i < proofs.length; i += 20) {
      const answers = await Promise.all(proofs.slice(i, i + 20).map((p) => userinfoWith(junk, p)));
      for (const res of answers) expect(res.json().error).toBe('invalid_token');
    }
    expect(await storedProofs()).toBe(before);
  });

  it('a proof with a live bound token is recorded once: the same proof again is refused', async () => {
    const tokens = await boundTokens(es256);
    const before = await storedProofs();
    const once = await userinfoProof(es256, tokens.access_token);
    expect((await userinfoWith(tokens.access_token, once)).statusCode).toBe(200);
    expect(await storedProofs()).toBe(before + 1);
    const again = await userinfoWith(tokens.access_token, once);
    expect(again.statusCode).toBe(401);
    expect(again.json().error_description).toMatch(/already used/);
  });

  it('one proof with a live bound token sent 20 times at once is answered exactly once', async () => {
    const tokens = await boundTokens(es256);
    const once = await userinfoProof(es256, tokens.access_token);
    const answers = await Promise.all(Array.from({ length: 20 }, () => userinfoWith(tokens.access_token, once)));
    expect(answers.map((r) => r.statusCode).sort()).toEqual([200, ...Array<number>(19).fill(401)]);
  });

  it("with a junk token the proof's signature is not even verified: a bad signature is answered invalid_token", async () => {
    const [header, payload] = (await userinfoProof(rsa4096, 'da_at_junk')).split('.');
    const res = await userinfoWith('da_at_junk', `${header}.${payload}.${'A'.repeat(683)}`);
    expect(res.statusCode).toBe(401);
    expect(res.json().error).toBe('invalid_token');
  });

  it("a proof of another key than the token's is refused and not recorded", async () => {
    const tokens = await boundTokens(es256);
    const other = await dpopKey();
    const before = await storedProofs();
    const res = await userinfoWith(tokens.access_token, await userinfoProof(other, tokens.access_token));
    expect(res.json().error).toBe('invalid_token');
    expect(await storedProofs()).toBe(before);
  });
});

describe('the token endpoint records a proof only once the grant found its credential (issue 28 §2)', () => {
  let web: WebApp;
  beforeAll(async () => {
    web = await seedWebApp(t);
  });

  const tokenRequest = (fields: Record<string, string>, dpop: string) =>
    t.app.inject({ method: 'POST', url: '/oauth/token', headers: { ...FORM, dpop }, payload: form(fields) });
  const refreshWith = (refreshToken: string, dpop: string) =>
    tokenRequest({ grant_type: 'refresh_token', refresh_token: refreshToken, client_id: tv.clientId }, dpop);
  const junk = () => randomBytes(24).toString('base64url');

  it.each<[string, () => Record<string, string>]>([
    ['polls with a junk device_code', () => ({ grant_type: DEVICE_GRANT, client_id: tv.clientId, device_code: `${TOKEN_PREFIX.deviceCode}${junk()}` })],
    [
      'refreshes with a junk refresh_token',
      () => ({ grant_type: 'refresh_token', client_id: tv.clientId, refresh_token: `${TOKEN_PREFIX.refreshToken}${junk()}` }),
    ],
    [
      'code redemptions with a junk code',
      () => ({
        grant_type: 'authorization_code',
        client_id: web.clientId,
        redirect_uri: REDIRECT_URI,
        code: `${TOKEN_PREFIX.authorizationCode}${junk()}`,
        code_verifier: pkcePair().verifier,
      }),
    ],
  ])("100 token requests with valid proofs of the sender's own key: %s write no row", async (_case, fields) => {
    const before = await storedProofs();
    const proofs = await Promise.all(Array.from({ length: 100 }, () => proof(es256)));
    for (let i = 0; i < proofs.length; i += 20) {
      const answers = await Promise.all(proofs.slice(i, i + 20).map((p) => tokenRequest(fields(), p)));
      for (const res of answers) {
        expect(res.statusCode, res.body).toBe(400);
        expect(res.json().error).toBe('invalid_grant');
      }
    }
    expect(await storedProofs()).toBe(before);
  });

  it('a poll of a live device_code records its proof once: the same proof at the next poll is refused', async () => {
    const flow = await startDeviceFlow(t, tv.clientId, { scope: 'openid' });
    const before = await storedProofs();
    t.clock.advance(flow.interval);
    const once = await proof(es256);
    const pending = await poll(t, tv.clientId, flow.device_code, { dpop: once });
    expect(pending.json().error).toBe('authorization_pending');
    expect(await storedProofs()).toBe(before + 1);
    await decide(t, flow.user_code, user.userId, 'approve');
    t.clock.advance(flow.interval);
    const again = await poll(t, tv.clientId, flow.device_code, { dpop: once });
    expect(again.statusCode).toBe(400);
    expect(again.json()).toMatchObject({ error: 'invalid_dpop_proof', error_description: expect.stringMatching(/already used/) });
    // The approval is still there for a poll with a new proof.
    t.clock.advance(flow.interval);
    const issued = await poll(t, tv.clientId, flow.device_code, { dpop: await proof(es256) });
    expect(issued.statusCode, issued.body).toBe(200);
    expect(issued.json().token_type).toBe('DPoP');
  });

  it('one proof sent 20 times at once with a poll of an approved request is answered once with tokens', async () => {
    const flow = await startDeviceFlow(t, tv.clientId, { scope: 'openid' }, { dpop: await proof(es256, { htu: at }) });
    await decide(t, flow.user_code, user.userId, 'approve');
    t.clock.advance(flow.interval);
    const once = await proof(es256);
    const answers = await Promise.all(Array.from({ length: 20 }, () => poll(t, tv.clientId, flow.device_code, { dpop: once })));
    expect(answers.filter((res) => res.statusCode === 200)).toHaveLength(1);
    for (const res of answers.filter((r) => r.statusCode !== 200)) expect(['slow_down', 'invalid_dpop_proof']).toContain(res.json().error);
  });

  it('a refresh records its proof once: the same proof then neither rotates, retries nor revokes', async () => {
    const tokens = await boundDeviceTokens(t, tv.clientId, user.userId, es256);
    const before = await storedProofs();
    const once = await proof(es256);
    const first = await refreshWith(tokens.refresh_token!, once);
    expect(first.statusCode, first.body).toBe(200);
    expect(await storedProofs()).toBe(before + 1);
    // The replaced token with the used proof: no retry's answer and no reuse's revocation.
    const replayed = await refreshWith(tokens.refresh_token!, once);
    expect(replayed.statusCode).toBe(400);
    expect(replayed.json()).toMatchObject({ error: 'invalid_dpop_proof', error_description: expect.stringMatching(/already used/) });
    expect((await grantOf(t, tokens.refresh_token!)).revoked_at).toBeNull();
    const next = await refreshWith(first.json().refresh_token, await proof(es256));
    expect(next.statusCode, next.body).toBe(200);
  });

  it('one proof sent 20 times at once with a refresh is answered once with tokens, and the grant lives on', async () => {
    const tokens = await boundDeviceTokens(t, tv.clientId, user.userId, es256);
    const once = await proof(es256);
    const answers = await Promise.all(Array.from({ length: 20 }, () => refreshWith(tokens.refresh_token!, once)));
    expect(answers.map((r) => r.statusCode).sort()).toEqual([200, ...Array<number>(19).fill(400)]);
    for (const res of answers.filter((r) => r.statusCode !== 200)) expect(res.json().error).toBe('invalid_dpop_proof');
    expect((await grantOf(t, tokens.refresh_token!)).revoked_at).toBeNull();
  });

  it('one proof sent 20 times at once with a code is answered once with tokens, and the replays revoke nothing', async () => {
    const pkce = pkcePair();
    const browser = await signedInBrowser(t, await seedUser(t));
    const code = (await codeFor(browser, authorizeUrl(web, pkce.challenge))).get('code') ?? '';
    const before = await storedProofs();
    const once = await proof(es256);
    const redeem = () =>
      tokenRequest({ grant_type: 'authorization_code', client_id: web.clientId, redirect_uri: REDIRECT_URI, code, code_verifier: pkce.verifier }, once);
    const answers = await Promise.all(Array.from({ length: 20 }, redeem));
    expect(answers.map((r) => r.statusCode).sort()).toEqual([200, ...Array<number>(19).fill(400)]);
    for (const res of answers.filter((r) => r.statusCode !== 200)) expect(res.json().error).toBe('invalid_dpop_proof');
    const issued = answers.find((r) => r.statusCode === 200)!.json() as TokenSet;
    expect((await grantOf(t, issued.access_token)).revoked_at).toBeNull();
    expect(await storedProofs()).toBe(before + 1);
  });
});

/** Server CPU (user + system, this process: app and embedded database alike) per request, in microseconds. */
async function cpuPerRequest(requests: ReadonlyArray<() => Promise<{ statusCode: number }>>, expected: number): Promise<number> {
  const start = process.cpuUsage();
  for (const send of requests) expect((await send()).statusCode).toBe(expected);
  const used = process.cpuUsage(start);
  return (used.user + used.system) / requests.length;
}

/**
 * Median CPU per request of two kinds of request, measured in alternating rounds so that neither
 * gets the quieter moment; each request is used once (proofs are single-use).
 */
async function compareCpu(
  ordinary: Array<() => Promise<{ statusCode: number }>>,
  ordinaryStatus: number,
  other: Array<() => Promise<{ statusCode: number }>>,
  otherStatus: number,
): Promise<{ ordinary: number; other: number; ratio: number }> {
  await cpuPerRequest(ordinary.splice(0, 1), ordinaryStatus);
  await cpuPerRequest(other.splice(0, 1), otherStatus);
  const rounds = 3;
  const size = Math.floor(Math.min(ordinary.length, other.length) / rounds);
  const a: number[] = [];
  const b: number[] = [];
  for (let round = 0; round < rounds; round++) {
    a.push(await cpuPerRequest(ordinary.splice(0, size), ordinaryStatus));
    b.push(await cpuPerRequest(other.splice(0, size), otherStatus));
  }
  const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[1]!;
  return { ordinary: median(a), other: median(b), ratio: median(b) / median(a) };
}

const report = (what: string, cost: { ordinary: number; other: number; ratio: number }) =>
  console.log(
    `DPoP userinfo CPU per request: ES256 proof of a known key ${cost.ordinary.toFixed(0)} µs; ${what} ${cost.other.toFixed(0)} µs; ratio ${cost.ratio.toFixed(2)}`,
  );

describe('the worst proof costs at most a few ordinary ones (issue 28 §2)', () => {
  const n = 41;
  let ordinaryTokens: TokenSet;
  let ordinary: Array<() => Promise<{ statusCode: number }>>;
  beforeAll(async () => {
    ordinaryTokens = await boundTokens(es256);
  });
  // Signed beforehand: only the server's work is measured.
  const ordinaryRequests = async () =>
    (await Promise.all(Array.from({ length: n }, () => userinfoProof(es256, ordinaryTokens.access_token)))).map(
      (p) => () => userinfoWith(ordinaryTokens.access_token, p),
    );

  it('an RSA-4096 proof with a new header each time, at a token bound to its key, costs at most 3 times an ES256 proof of a known key', async () => {
    ordinary = await ordinaryRequests();
    const worstTokens = await boundTokens(rsa4096);
    // A new kid each time defeats the cache of checked headers: the key is imported, named and used every time.
    const worst = await Promise.all(
      Array.from({ length: n }, () => userinfoProof(rsa4096, worstTokens.access_token, { jwk: { ...rsa4096.jwk, kid: b64(randomBytes(12)) } })),
    );
    const cost = await compareCpu(
      ordinary,
      200,
      worst.map((p) => () => userinfoWith(worstTokens.access_token, p)),
      200,
    );
    report('RSA-4096 proof with a new header', cost);
    expect(cost.ratio).toBeLessThan(3);
  }, 60_000);

  it('a proof of an RSA key with a 3,072-bit exponent, with a live token, costs no more than 3 ordinary proofs', async () => {
    ordinary = await ordinaryRequests();
    const rsa = await dpopKey('RS256');
    // OpenSSL wants e < n and, above 3,072 bits of modulus, e of at most 64 bits; and a signature as long as the modulus.
    // So a 3,072-bit modulus, an exponent just below it and 384 bytes of signature: the exponentiation is computed in full.
    const jwk = {
      kty: 'RSA',
      n: b64(Buffer.concat([Buffer.from([0xff]), randomBytes(382), Buffer.from([1])])),
      e: b64(Buffer.concat([Buffer.from([0x7f]), randomBytes(381), Buffer.from([1])])),
    };
    const hostile = await Promise.all(
      Array.from({ length: n }, async () => {
        const [header, payload] = (await userinfoProof(rsa, ordinaryTokens.access_token, { jwk })).split('.');
        return `${header}.${payload}.${b64(Buffer.concat([Buffer.from([1]), randomBytes(383)]))}`;
      }),
    );
    // The token is live, so the proof's key is looked at (with a junk token it would not even be that).
    const cost = await compareCpu(
      ordinary,
      200,
      hostile.map((p) => () => userinfoWith(ordinaryTokens.access_token, p)),
      401,
    );
    report('RSA proof with a 3,072-bit exponent', cost);
    expect(cost.ratio).toBeLessThan(3);
  }, 60_000);
});
