import { createLocalJWKSet, decodeJwt, jwtVerify } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { afterAnnounced, basicAuth, FORM, form, seedClient, seedUser, startTestApp, type TestApp } from '../helpers/app.js';
import { type Browser, signedInBrowser } from '../helpers/browser.js';
import { introspection, refresh, revoke, userinfo, type TestClient } from '../helpers/tokens.js';
import { authorizeUrl, codeFor, pkcePair, REDIRECT_URI, seedWebApp, type WebApp } from '../helpers/web-app.js';

let t: TestApp;
let publicApp: WebApp;
let confidentialApp: WebApp;
let rs: TestClient;

beforeAll(async () => {
  t = await startTestApp();
  publicApp = await seedWebApp(t);
  confidentialApp = await seedWebApp(t, { type: 'confidential', name: 'Photo Server' });
  rs = await seedClient(t, { kind: 'web', type: 'confidential', name: 'Photo API' });
});
afterAll(() => t.close());

type User = Awaited<ReturnType<typeof seedUser>>;

/** Signs `user` in, consents, and returns a fresh code with the verifier it was made for. */
async function codeOf(app: WebApp, user: User, extra: Record<string, string | undefined> = {}, browser?: Browser) {
  const pkce = pkcePair();
  const signedIn = browser ?? (await signedInBrowser(t, user));
  const params = await codeFor(signedIn, authorizeUrl(app, pkce.challenge, extra));
  const code = params.get('code');
  if (!code) throw new Error(`no code: ${params.toString()}`);
  return { code, verifier: pkce.verifier, browser: signedIn };
}

/** The token request as the app sends it: Basic for a confidential app unless `post`, client_id for a public one. */
function redeem(app: WebApp, fields: Record<string, string | undefined>, options: { post?: boolean; headers?: Record<string, string> } = {}) {
  const confidential = app.clientSecret !== null;
  const auth = !confidential
    ? { fields: { client_id: app.clientId }, headers: {} }
    : options.post
      ? { fields: { client_id: app.clientId, client_secret: app.clientSecret ?? '' }, headers: {} }
      : { fields: {}, headers: { authorization: basicAuth(app.clientId, app.clientSecret ?? '') } };
  return t.app.inject({
    method: 'POST',
    url: '/oauth/token',
    headers: { ...FORM, ...auth.headers, ...options.headers },
    payload: form({ grant_type: 'authorization_code', redirect_uri: REDIRECT_URI, ...auth.fields, ...fields }),
  });
}

describe('redeeming a code (OAuth 2.1 §4.1.3)', () => {
  it('a public app redeems with PKCE alone: access token, ID token with the nonce, no refresh token without offline_access', async () => {
    const user = await seedUser(t);
    const { code, verifier } = await codeOf(publicApp, user, { scope: 'openid profile email' });
    const res = await redeem(publicApp, { code, code_verifier: verifier });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.headers['cache-control']).toBe('no-store');
    const body = res.json();
    expect(body.access_token).toMatch(/^da_at_/);
    expect(body.refresh_token).toBeUndefined();
    expect(body.scope).toBe('openid profile email');
    const claims = decodeJwt(body.id_token);
    expect(claims).toMatchObject({ iss: 'http://localhost:3000', aud: publicApp.clientId, sub: user.userId, nonce: 'nonce-456', email: user.email });
    expect(typeof claims.auth_time).toBe('number');
    const info = await userinfo(t, body.access_token);
    expect(info.statusCode).toBe(200);
    expect(info.json().sub).toBe(user.userId);
  });

  it('the ID token verifies against the published keys', async () => {
    const { code, verifier } = await codeOf(publicApp, await seedUser(t));
    const body = (await redeem(publicApp, { code, code_verifier: verifier })).json();
    const jwks = (await t.app.inject({ method: 'GET', url: '/.well-known/jwks.json' })).json();
    const verified = await jwtVerify(body.id_token, createLocalJWKSet(jwks), { issuer: 'http://localhost:3000', audience: publicApp.clientId });
    expect(verified.payload.nonce).toBe('nonce-456');
  });

  it('offline_access brings a refresh token, which rotates and detects reuse exactly as for devices', async () => {
    const { code, verifier } = await codeOf(publicApp, await seedUser(t), { scope: 'openid offline_access' });
    const first = (await redeem(publicApp, { code, code_verifier: verifier })).json();
    expect(first.refresh_token).toMatch(/^da_rt_/);
    const rotated = await refresh(t, publicApp, first.refresh_token);
    expect(rotated.statusCode, rotated.body).toBe(200);
    const second = rotated.json();
    expect(second.refresh_token).not.toBe(first.refresh_token);
    // Past the retry window, the replaced token presented again is reuse.
    t.clock.advance(t.config.refreshRetryWindow + 1);
    const reused = await refresh(t, publicApp, first.refresh_token);
    expect(reused.json().error).toBe('invalid_grant');
    expect((await refresh(t, publicApp, second.refresh_token)).json().error).toBe('invalid_grant');
    expect((await introspection(t, rs, second.access_token)).active).toBe(false);
  });

  it('a confidential app redeems with HTTP Basic or client_secret_post, and not without its secret', async () => {
    const user = await seedUser(t);
    const basic = await codeOf(confidentialApp, user);
    expect((await redeem(confidentialApp, { code: basic.code, code_verifier: basic.verifier })).statusCode).toBe(200);
    const post = await codeOf(confidentialApp, user, {}, basic.browser);
    expect((await redeem(confidentialApp, { code: post.code, code_verifier: post.verifier }, { post: true })).statusCode).toBe(200);

    const third = await codeOf(confidentialApp, user, {}, basic.browser);
    const noSecret = await t.app.inject({
      method: 'POST',
      url: '/oauth/token',
      headers: FORM,
      payload: form({
        grant_type: 'authorization_code',
        client_id: confidentialApp.clientId,
        code: third.code,
        code_verifier: third.verifier,
        redirect_uri: REDIRECT_URI,
      }),
    });
    expect(noSecret.statusCode).toBe(401);
    expect(noSecret.json().error).toBe('invalid_client');
    const wrongSecret = await t.app.inject({
      method: 'POST',
      url: '/oauth/token',
      headers: FORM,
      payload: form({
        grant_type: 'authorization_code',
        client_id: confidentialApp.clientId,
        client_secret: 'da_cs_wrong',
        code: third.code,
        code_verifier: third.verifier,
        redirect_uri: REDIRECT_URI,
      }),
    });
    expect(wrongSecret.statusCode).toBe(401);
    const both = await redeem(confidentialApp, {
      code: third.code,
      code_verifier: third.verifier,
      client_id: confidentialApp.clientId,
      client_secret: confidentialApp.clientSecret ?? '',
    });
    expect(both.statusCode).toBe(400);
    expect(both.json().error).toBe('invalid_request');
    // None of those attempts spent the code: the app itself still can.
    expect((await redeem(confidentialApp, { code: third.code, code_verifier: third.verifier })).statusCode).toBe(200);
  });

  it('introspection takes a secret in the body too (RFC 7662 §2.1: any method the server supports)', async () => {
    const res = await t.app.inject({
      method: 'POST',
      url: '/oauth/introspect',
      headers: FORM,
      payload: form({ token: 'da_at_x', client_id: rs.clientId, client_secret: rs.clientSecret ?? '' }),
    });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toEqual({ active: false });
  });
});

describe('a code is bound to its app, redirect URI and PKCE challenge', () => {
  const refusedAlike = (res: { statusCode: number; json(): { error: string; error_description: string } }) => {
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toBe('invalid_grant');
    return res.json().error_description;
  };

  it('PKCE missing, wrong, or malformed: invalid_grant, and the code is not spent: its app still redeems it (issue 28 §4)', async () => {
    const user = await seedUser(t);
    for (const verifier of [undefined, pkcePair().verifier, 'short', `${'a'.repeat(43)}\u00e9`]) {
      const { code, verifier: right } = await codeOf(publicApp, user);
      refusedAlike(await redeem(publicApp, { code, code_verifier: verifier }));
      expect((await redeem(publicApp, { code, code_verifier: right })).statusCode).toBe(200);
    }
  });

  it('whoever sees a code but not its verifier cannot spend it first: 20 wrong verifiers at once, then the app redeems it', async () => {
    const { code, verifier } = await codeOf(publicApp, await seedUser(t));
    const wrong = await Promise.all(Array.from({ length: 20 }, () => redeem(publicApp, { code, code_verifier: pkcePair().verifier })));
    for (const res of wrong) refusedAlike(res);
    expect((await redeem(publicApp, { code, code_verifier: verifier })).statusCode).toBe(200);
  });

  it('a redirect_uri other than the request’s, or none: invalid_grant', async () => {
    const app = await seedWebApp(t, { redirectUris: [REDIRECT_URI, 'https://photos.example/other'] });
    const user = await seedUser(t);
    for (const redirect of ['https://photos.example/other', undefined, `${REDIRECT_URI}/`]) {
      const { code, verifier } = await codeOf(app, user);
      refusedAlike(await redeem(app, { code, code_verifier: verifier, redirect_uri: redirect }));
    }
  });

  it('another app’s code is refused like an unknown one and stays usable by its own app', async () => {
    const { code, verifier } = await codeOf(publicApp, await seedUser(t));
    const other = await seedWebApp(t, { name: 'Other Board' });
    const stolen = refusedAlike(await redeem(other, { code, code_verifier: verifier }));
    const unknown = refusedAlike(await redeem(other, { code: 'da_ac_unknown', code_verifier: verifier }));
    expect(stolen).toBe(unknown);
    expect((await redeem(publicApp, { code, code_verifier: verifier })).statusCode).toBe(200);
  });

  it('an expired code (after 5 minutes) is refused like an unknown one', async () => {
    const { code, verifier } = await codeOf(publicApp, await seedUser(t));
    t.clock.advance(301);
    const expired = refusedAlike(await redeem(publicApp, { code, code_verifier: verifier }));
    expect(expired).toBe(refusedAlike(await redeem(publicApp, { code: 'da_ac_unknown', code_verifier: verifier })));
  });

  it('a disabled app gets invalid_client and spends nothing; enabled again, it redeems the code', async () => {
    const app = await seedWebApp(t, { name: 'Paused Board' });
    const { code, verifier } = await codeOf(app, await seedUser(t));
    const { setClientDisabled } = await import('../../src/apps/registration.js');
    await afterAnnounced(t, () => setClientDisabled(t.deps.db, app.clientId, true, t.clock.now()));
    const refused = await Promise.all(Array.from({ length: 5 }, () => redeem(app, { code, code_verifier: verifier })));
    for (const res of refused) {
      expect(res.statusCode).toBe(401);
      expect(res.json().error).toBe('invalid_client');
    }
    await afterAnnounced(t, () => setClientDisabled(t.deps.db, app.clientId, false, t.clock.now()));
    expect((await redeem(app, { code, code_verifier: verifier })).statusCode).toBe(200);
  });

  it('an app not registered for authorization_code gets unauthorized_client at the token endpoint', async () => {
    const deviceOnly = await seedClient(t, { kind: 'web', grantTypes: ['urn:ietf:params:oauth:grant-type:device_code'] });
    const res = await t.app.inject({
      method: 'POST',
      url: '/oauth/token',
      headers: FORM,
      payload: form({
        grant_type: 'authorization_code',
        client_id: deviceOnly.clientId,
        code: 'da_ac_x',
        code_verifier: pkcePair().verifier,
        redirect_uri: REDIRECT_URI,
      }),
    });
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toBe('unauthorized_client');
  });

  it('the purge deletes codes an hour after they expired and keeps the others', async () => {
    const { purgeExpired } = await import('../../src/housekeeping/purge.js');
    const user = await seedUser(t);
    const old = await codeOf(publicApp, user);
    t.clock.advance(300 + 3600 + 1);
    const fresh = await codeOf(publicApp, user, {}, old.browser);
    const purged = await purgeExpired(t.deps.db, t.clock.now(), t.deps.config.purge);
    expect(purged.authorizationCodes).toBeGreaterThanOrEqual(1);
    const left = await t.deps.db.selectFrom('authorization_codes').select('expires_at').execute();
    expect(left.every((row) => row.expires_at.getTime() > t.clock.now().getTime() - 3600_000)).toBe(true);
    expect((await redeem(publicApp, { code: fresh.code, code_verifier: fresh.verifier })).statusCode).toBe(200);
  });

  it('codes are stored only as hashes', async () => {
    const { code } = await codeOf(publicApp, await seedUser(t));
    const rows = await t.deps.db.selectFrom('authorization_codes').selectAll().execute();
    const dump = JSON.stringify(rows);
    expect(dump).not.toContain(code);
    expect(dump).not.toContain(code.slice(6));
  });
});

describe('a code redeemed twice (RFC 6749 §4.1.2)', () => {
  it('is refused the second time, and every token the first redemption issued is revoked', async () => {
    const { code, verifier } = await codeOf(publicApp, await seedUser(t), { scope: 'openid offline_access' });
    const first = (await redeem(publicApp, { code, code_verifier: verifier })).json();
    expect((await introspection(t, rs, first.access_token)).active).toBe(true);
    const second = await redeem(publicApp, { code, code_verifier: verifier });
    expect(second.statusCode).toBe(400);
    expect(second.json().error).toBe('invalid_grant');
    expect((await introspection(t, rs, first.access_token)).active).toBe(false);
    expect((await userinfo(t, first.access_token)).statusCode).toBe(401);
    expect((await refresh(t, publicApp, first.refresh_token)).json().error).toBe('invalid_grant');
  });

  it('20 redemptions at once: exactly one gets tokens, and the replays revoke them', async () => {
    const { code, verifier } = await codeOf(publicApp, await seedUser(t), { scope: 'openid offline_access' });
    const answers = await Promise.all(Array.from({ length: 20 }, () => redeem(publicApp, { code, code_verifier: verifier })));
    const issued = answers.filter((res) => res.statusCode === 200);
    expect(issued).toHaveLength(1);
    expect(answers.filter((res) => res.statusCode === 400 && res.json().error === 'invalid_grant')).toHaveLength(19);
    const tokens = issued[0]!.json();
    expect((await introspection(t, rs, tokens.access_token)).active).toBe(false);
    expect((await refresh(t, publicApp, tokens.refresh_token)).json().error).toBe('invalid_grant');
  });

  it('a replay with a wrong or missing verifier revokes nothing (issue 28 §4)', async () => {
    const { code, verifier } = await codeOf(publicApp, await seedUser(t), { scope: 'openid offline_access' });
    const tokens = (await redeem(publicApp, { code, code_verifier: verifier })).json();
    for (const wrong of [pkcePair().verifier, undefined]) {
      const res = await redeem(publicApp, { code, code_verifier: wrong });
      expect(res.statusCode).toBe(400);
      expect(res.json().error).toBe('invalid_grant');
    }
    expect((await introspection(t, rs, tokens.access_token)).active).toBe(true);
    expect((await refresh(t, publicApp, tokens.refresh_token)).statusCode).toBe(200);
  });

  it('a replay by another app spends nothing and revokes nothing', async () => {
    const { code, verifier } = await codeOf(publicApp, await seedUser(t));
    const tokens = (await redeem(publicApp, { code, code_verifier: verifier })).json();
    const other = await seedWebApp(t, { name: 'Replaying Board' });
    expect((await redeem(other, { code, code_verifier: verifier })).statusCode).toBe(400);
    expect((await introspection(t, rs, tokens.access_token)).active).toBe(true);
  });
});

describe('consent under Connected apps', () => {
  it('an app the user consented to is listed, and Remove access revokes its tokens and forgets the consent', async () => {
    const user = await seedUser(t);
    const { code, verifier, browser } = await codeOf(publicApp, user, { scope: 'openid offline_access' });
    const tokens = (await redeem(publicApp, { code, code_verifier: verifier })).json();
    const apps = await browser.get('/account/apps');
    expect(apps.body).toContain('Photo Board');
    const removed = await browser.post('/account/apps/remove', { client_id: publicApp.clientId });
    expect(removed.statusCode).toBe(303);
    expect((await introspection(t, rs, tokens.access_token)).active).toBe(false);
    expect((await refresh(t, publicApp, tokens.refresh_token)).json().error).toBe('invalid_grant');
    expect((await browser.get('/account/apps')).body).not.toContain('Photo Board</h2>');
    // Asked again next time.
    const again = await browser.get(authorizeUrl(publicApp, pkcePair().challenge));
    expect(again.statusCode).toBe(200);
    expect(again.body).toContain('name="action" value="allow"');
  });

  it('consent alone (tokens long expired) is listed and can be removed', async () => {
    const user = await seedUser(t);
    const { browser } = await codeOf(publicApp, user);
    t.clock.advance(7200);
    expect((await browser.get('/account/apps')).body).toContain('Photo Board');
    const removed = await browser.post('/account/apps/remove', { client_id: publicApp.clientId });
    expect(removed.statusCode).toBe(303);
    expect(String(removed.headers.location)).toContain('removed=');
    const prompt = await browser.get(authorizeUrl(publicApp, pkcePair().challenge, { prompt: 'none' }));
    expect(new URL(String(prompt.headers.location)).searchParams.get('error')).toBe('consent_required');
  });

  it('revoking the app’s own token (RFC 7009) ends that grant but keeps the consent', async () => {
    const user = await seedUser(t);
    const { code, verifier, browser } = await codeOf(publicApp, user);
    const tokens = (await redeem(publicApp, { code, code_verifier: verifier })).json();
    expect((await revoke(t, publicApp, tokens.access_token)).statusCode).toBe(200);
    const silent = await browser.get(authorizeUrl(publicApp, pkcePair().challenge, { prompt: 'none' }));
    expect(new URL(String(silent.headers.location)).searchParams.get('code')).toMatch(/^da_ac_/);
  });
});

describe('hostile token requests', () => {
  it('NUL, a lone surrogate or invalid UTF-8 in code or verifier: invalid_request, nothing spent', async () => {
    const { code, verifier } = await codeOf(publicApp, await seedUser(t));
    for (const bad of ['%00', '%ED%A0%80', '%FF']) {
      const payload = `grant_type=authorization_code&client_id=${publicApp.clientId}&redirect_uri=${encodeURIComponent(REDIRECT_URI)}&code=${code}${bad}&code_verifier=${verifier}`;
      const res = await t.app.inject({ method: 'POST', url: '/oauth/token', headers: FORM, payload });
      expect(res.statusCode, bad).toBe(400);
      expect(res.json().error, bad).toBe('invalid_request');
    }
    expect((await redeem(publicApp, { code, code_verifier: verifier })).statusCode).toBe(200);
  });

  it('an overlong code is refused without a database lookup’s difference', async () => {
    const res = await redeem(publicApp, { code: `da_ac_${'x'.repeat(5000)}`, code_verifier: pkcePair().verifier });
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toBe('invalid_grant');
  });
});
