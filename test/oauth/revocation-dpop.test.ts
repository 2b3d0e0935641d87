import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { epochSeconds } from '../../src/lib/clock.js';
import { basicAuth, FORM, form, seedClient, seedUser, startTestApp, type TestApp } from '../helpers/app.js';
import { boundDeviceTokens, dpopKey, proofFor, type DpopKey } from '../helpers/dpop.js';
import { refresh, signIn, type TestClient, type TokenSet } from '../helpers/tokens.js';

/**
 * Issue 28 §4: a stolen DPoP-bound refresh token, useless for refreshing, still revoked the grant
 * at /oauth/revoke with just the public client_id. A public app revoking a bound token now proves
 * the key; without the proof the answer is the same 200 {} (RFC 7009 §2.2) and nothing is revoked.
 */

let t: TestApp;
let tv: TestClient;
let user: { userId: string };
let key: DpopKey;

beforeAll(async () => {
  t = await startTestApp();
  tv = await seedClient(t);
  user = await seedUser(t);
  key = await dpopKey();
});
afterAll(() => t.close());

const revokeProof = (k: DpopKey) => proofFor(k, { iat: epochSeconds(t.clock.now()), htu: '/oauth/revoke' });

function revokeAsPublicApp(token: string, headers: Record<string, string> = {}) {
  return t.app.inject({ method: 'POST', url: '/oauth/revoke', headers: { ...FORM, ...headers }, payload: form({ client_id: tv.clientId, token }) });
}

/** Whether the grant still works: a refresh with the key's proof rotates it. */
async function grantLives(tokens: TokenSet): Promise<boolean> {
  const res = await t.app.inject({
    method: 'POST',
    url: '/oauth/token',
    headers: { ...FORM, dpop: await proofFor(key, { iat: epochSeconds(t.clock.now()) }) },
    payload: form({ grant_type: 'refresh_token', refresh_token: tokens.refresh_token, client_id: tv.clientId }),
  });
  return res.statusCode === 200;
}

describe('a public app revoking a DPoP-bound token proves the key (RFC 7009, RFC 9449)', () => {
  it.each([
    ['the refresh token', (tokens: TokenSet) => tokens.refresh_token!],
    ['the access token', (tokens: TokenSet) => tokens.access_token],
  ])('%s revoked with only the client_id: 200 {} and the grant lives on', async (_case, pick) => {
    const tokens = await boundDeviceTokens(t, tv.clientId, user.userId, key);
    const res = await revokeAsPublicApp(pick(tokens));
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({});
    expect(await grantLives(tokens)).toBe(true);
  });

  it('with a proof of another key: 200 {} and the grant lives on', async () => {
    const tokens = await boundDeviceTokens(t, tv.clientId, user.userId, key);
    const res = await revokeAsPublicApp(tokens.refresh_token!, { dpop: await revokeProof(await dpopKey()) });
    expect(res.statusCode).toBe(200);
    expect(await grantLives(tokens)).toBe(true);
  });

  it('with a proof of the bound key: revoked; the same proof again, for another grant of the key, is refused as replayed', async () => {
    const tokens = await boundDeviceTokens(t, tv.clientId, user.userId, key);
    const proof = await revokeProof(key);
    expect((await revokeAsPublicApp(tokens.refresh_token!, { dpop: proof })).statusCode).toBe(200);
    expect(await grantLives(tokens)).toBe(false);
    const other = await boundDeviceTokens(t, tv.clientId, user.userId, key);
    const again = await revokeAsPublicApp(other.refresh_token!, { dpop: proof });
    expect(again.statusCode).toBe(400);
    expect(again.json().error).toBe('invalid_dpop_proof');
    expect(await grantLives(other)).toBe(true);
  });

  it('a malformed DPoP header is 400 invalid_dpop_proof and revokes nothing', async () => {
    const tokens = await boundDeviceTokens(t, tv.clientId, user.userId, key);
    for (const dpop of ['not-a-proof', 'a.b.\u00e9', await proofFor(key, { iat: epochSeconds(t.clock.now()), htu: '/oauth/token' })]) {
      const res = await revokeAsPublicApp(tokens.refresh_token!, { dpop });
      expect(res.statusCode).toBe(400);
      expect(res.json().error).toBe('invalid_dpop_proof');
    }
    expect(await grantLives(tokens)).toBe(true);
  });

  it('an unbound token is revoked with the client_id alone, as before', async () => {
    const tokens = await signIn(t, tv, user.userId, 'openid offline_access');
    expect((await revokeAsPublicApp(tokens.refresh_token!)).statusCode).toBe(200);
    expect((await refresh(t, tv, tokens.refresh_token!)).json().error).toBe('invalid_grant');
  });
});

describe('with server nonces (DPOP_NONCES=true), revocation answers as the token endpoint does (RFC 9449 §8)', () => {
  let n: TestApp;
  let app: TestClient;
  let rs: TestClient;
  let owner: { userId: string };
  beforeAll(async () => {
    n = await startTestApp({ env: { DPOP_NONCES: 'true' } });
    app = await seedClient(n);
    rs = await seedClient(n, { kind: 'web', type: 'confidential', name: 'Nonce API', introspection: true });
    owner = await seedUser(n);
  });
  afterAll(() => n.close());

  const revokeAt = (token: string, headers: Record<string, string> = {}) =>
    n.app.inject({ method: 'POST', url: '/oauth/revoke', headers: { ...FORM, ...headers }, payload: form({ client_id: app.clientId, token }) });
  const nonceProof = (nonce?: string) => proofFor(key, { iat: epochSeconds(n.clock.now()), htu: '/oauth/revoke', ...(nonce === undefined ? {} : { nonce }) });

  it('every answer carries the current DPoP-Nonce; a proof without it is 400 use_dpop_nonce and revokes nothing; with it, the grant is revoked', async () => {
    const first = await signIn(n, app, owner.userId, 'openid offline_access');
    const plain = await revokeAt('da_rt_unknown');
    expect(plain.statusCode).toBe(200);
    expect(plain.json()).toEqual({});
    const nonce = String(plain.headers['dpop-nonce']);
    expect(nonce).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(plain.headers['cache-control']).toBe('no-store');

    const refused = await revokeAt(first.refresh_token!, { dpop: await nonceProof() });
    expect(refused.statusCode).toBe(400);
    expect(refused.json().error).toBe('use_dpop_nonce');
    expect(refused.headers['dpop-nonce']).toBe(nonce);
    expect((await refresh(n, app, first.refresh_token!)).statusCode).toBe(200);

    const second = await signIn(n, app, owner.userId, 'openid offline_access');
    const accepted = await revokeAt(second.refresh_token!, { dpop: await nonceProof(nonce) });
    expect(accepted.statusCode, accepted.body).toBe(200);
    expect(accepted.headers['dpop-nonce']).toBe(nonce);
    expect((await refresh(n, app, second.refresh_token!)).json().error).toBe('invalid_grant');
  });

  it('introspection, which takes no DPoP proof, carries no nonce', async () => {
    const tokens = await signIn(n, app, owner.userId, 'openid');
    const res = await n.app.inject({
      method: 'POST',
      url: '/oauth/introspect',
      headers: { ...FORM, authorization: basicAuth(rs.clientId, rs.clientSecret!) },
      payload: form({ token: tokens.access_token }),
    });
    expect(res.json().active).toBe(true);
    expect(res.headers['cache-control']).toBe('no-store');
    expect(res.headers).not.toHaveProperty('dpop-nonce');
  });
});
