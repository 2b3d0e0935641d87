import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basicAuth, FORM, seedUser, startTestApp, type TestApp } from '../helpers/app.js';
import { Browser, signedInBrowser } from '../helpers/browser.js';

// Every kind of answer: JSON, a page, a redirect, OAuth errors, a refused body type, a 404.
const requests = [
  ['discovery JSON', { method: 'GET', url: '/.well-known/openid-configuration' }, 200],
  ['sign-in page', { method: 'GET', url: '/signin' }, 200],
  ['redirect to sign-in', { method: 'GET', url: '/activate' }, 303],
  ['token request without a client', { method: 'POST', url: '/oauth/token', headers: FORM, payload: 'grant_type=password' }, 401],
  [
    'unknown client at introspection',
    { method: 'POST', url: '/oauth/introspect', headers: { ...FORM, authorization: basicAuth('nobody', 'x') }, payload: 'token=x' },
    401,
  ],
  ['JSON body refused', { method: 'POST', url: '/oauth/token', headers: { 'content-type': 'application/json' }, payload: '{}' }, 415],
  ['unknown path', { method: 'GET', url: '/no/such/page' }, 404],
] as const;

describe('Strict-Transport-Security', () => {
  let https: TestApp;
  let http: TestApp;
  beforeAll(async () => {
    https = await startTestApp({ env: { ISSUER: 'https://auth.example.test' } });
    http = await startTestApp({ env: { ISSUER: 'http://localhost:3000' } });
  });
  afterAll(async () => {
    await https.close();
    await http.close();
  });

  it.each(requests)('an https issuer sends two years of HSTS, without includeSubDomains or preload, on %s', async (_name, request, status) => {
    const res = await https.app.inject({ ...request });
    expect(res.statusCode).toBe(status);
    expect(res.headers['strict-transport-security']).toBe('max-age=63072000');
  });

  it.each(requests)('an http issuer never sends HSTS, not even on %s', async (_name, request, status) => {
    const res = await http.app.inject({ ...request });
    expect(res.statusCode).toBe(status);
    expect(res.headers['strict-transport-security']).toBeUndefined();
  });
});

describe('Content-Security-Policy of pages', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp();
  });
  afterAll(() => t.close());

  it("images load from our own origin only: img-src is 'self', and no directive names a remote host or scheme", async () => {
    const signedIn = await signedInBrowser(t, await seedUser(t));
    const pages = [
      ['sign-in page', await new Browser(t).get('/signin')],
      ['code step', await signedIn.get('/activate')],
      ['Devices page', await signedIn.get('/account/devices')],
      ['404 page', await signedIn.get('/no/such/page')],
    ] as const;
    for (const [name, res] of pages) {
      const directives = String(res.headers['content-security-policy'])
        .split(';')
        .map((d) => d.trim());
      expect(
        directives.filter((d) => d.startsWith('img-src')),
        name,
      ).toEqual(["img-src 'self'"]);
      for (const directive of directives) expect(directive, name).not.toMatch(/https?:|\*|data:/);
    }
  });
});
