import { calculateJwkThumbprint } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from './helpers/app.js';

describe('discovery and keys', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp();
  });
  afterAll(() => t.close());

  it.each(['/.well-known/openid-configuration', '/.well-known/oauth-authorization-server'])(
    'RFC 8414: %s names every endpoint under the issuer',
    async (path) => {
      const res = await t.app.inject({ method: 'GET', url: path });
      expect(res.statusCode).toBe(200);
      const meta = res.json();
      expect(meta.issuer).toBe('http://localhost:3000');
      expect(meta.device_authorization_endpoint).toBe('http://localhost:3000/oauth/device/code');
      expect(meta.token_endpoint).toBe('http://localhost:3000/oauth/token');
      expect(meta.grant_types_supported).toContain('urn:ietf:params:oauth:grant-type:device_code');
      expect(meta.grant_types_supported).toContain('refresh_token');
      expect(meta.id_token_signing_alg_values_supported).toEqual(['RS256']);
    },
  );

  it('lists the authorization-code flow as OAuth 2.1 profiles it: code only, PKCE S256 only, iss in responses', async () => {
    const meta = (await t.app.inject({ method: 'GET', url: '/.well-known/openid-configuration' })).json();
    expect(meta.authorization_endpoint).toBe('http://localhost:3000/oauth/authorize');
    expect(meta.response_types_supported).toEqual(['code']);
    expect(meta.response_modes_supported).toEqual(['query']);
    expect(meta.code_challenge_methods_supported).toEqual(['S256']);
    expect(meta.grant_types_supported).toContain('authorization_code');
    expect(meta.authorization_response_iss_parameter_supported).toBe(true);
    expect(meta.token_endpoint_auth_methods_supported).toEqual(['client_secret_basic', 'client_secret_post', 'none']);
    expect(meta.claims_supported).toContain('nonce');
  });

  it('RFC 9449 §5.1: lists dpop_signing_alg_values_supported, asymmetric algorithms only', async () => {
    const meta = (await t.app.inject({ method: 'GET', url: '/.well-known/oauth-authorization-server' })).json();
    expect(meta.dpop_signing_alg_values_supported).toEqual(['ES256', 'ES384', 'EdDSA', 'Ed25519', 'PS256', 'RS256']);
  });

  it('publishes the signing key and the next one, RS256 with their thumbprints as kid, and no private part', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/.well-known/jwks.json' });
    const { keys } = res.json();
    expect(keys).toHaveLength(2);
    expect(keys.map((k: { kid: string }) => k.kid)).toContain(t.deps.keys.signingKey().kid);
    for (const key of keys) {
      expect(key).toMatchObject({ kty: 'RSA', alg: 'RS256', use: 'sig' });
      expect(key.kid).toBe(await calculateJwkThumbprint(key, 'sha256'));
      expect(key.d).toBeUndefined();
      expect(key.p).toBeUndefined();
    }
  });

  it('an unknown OAuth path answers a JSON error, an unknown page a page', async () => {
    const api = await t.app.inject({ method: 'GET', url: '/oauth/nothing' });
    expect(api.statusCode).toBe(404);
    expect(api.json().error).toBe('invalid_request');
    const page = await t.app.inject({ method: 'GET', url: '/nothing' });
    expect(page.statusCode).toBe(404);
    expect(page.headers['content-type']).toContain('text/html');
    expect(page.headers['content-security-policy']).toContain("frame-ancestors 'none'");
  });
});
