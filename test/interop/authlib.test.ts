import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { seedClient, seedUser, startTestApp, type TestApp } from '../helpers/app.js';
import { inputValue, signedInBrowser, type Browser } from '../helpers/browser.js';
import { freePort } from '../helpers/server-process.js';
import { answerConsent } from '../helpers/web-app.js';

/**
 * Issue 29 §7: Debian 12's python3-authlib 1.2 (with requests), knowing the server from its
 * discovery document alone (test/interop/authlib/client.py): the device flow with a public and a
 * confidential app, refresh once the access token has expired, revocation; the code flow with
 * client_secret_basic and client_secret_post. The user decides on our pages, as the test helpers do.
 */

/** Debian's interpreter: python3-authlib is installed for it, not for another python3 on PATH. */
const PYTHON = '/usr/bin/python3';
const SCRIPT = path.join(import.meta.dirname, 'authlib', 'client.py');
const ACCESS_TOKEN_TTL = 2;
const RUN_BOUND_MS = 90_000;

let t: TestApp;
let issuer: string;
let user: Awaited<ReturnType<typeof seedUser>>;
let browser: Browser;

beforeAll(async () => {
  if (!existsSync(PYTHON)) throw new Error(`${PYTHON} is missing: install python3-authlib and python3-requests (.ci/run does)`);
  const port = await freePort();
  issuer = `http://127.0.0.1:${port}`;
  t = await startTestApp({ realTime: true, env: { ISSUER: issuer, DEVICE_POLL_INTERVAL: '1', ACCESS_TOKEN_TTL: `${ACCESS_TOKEN_TTL}` } });
  await t.app.listen({ port, host: '127.0.0.1' });
  user = await seedUser(t);
  browser = await signedInBrowser(t, user);
}, 60_000);
afterAll(() => t?.close());

type Line = Record<string, unknown> & { step: string };

/** Runs client.py; `onLine` answers a line (its return value goes to the script's stdin), bounded in time. */
function runScript(args: string[], secret: string | null, onLine: (line: Line) => Promise<string | undefined>): Promise<Line[]> {
  return new Promise((resolve, reject) => {
    const child = spawn(PYTHON, [SCRIPT, ...args], {
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...(secret ? { CLIENT_SECRET: secret } : {}) },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), RUN_BOUND_MS);
    const lines: Line[] = [];
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    let pending = Promise.resolve();
    createInterface({ input: child.stdout }).on('line', (text) => {
      const line = JSON.parse(text) as Line;
      lines.push(line);
      pending = pending.then(async () => {
        const answer = await onLine(line);
        if (answer !== undefined) child.stdin.write(`${answer}\n`);
      });
      pending.catch((error: unknown) => {
        child.kill('SIGKILL');
        reject(error instanceof Error ? error : new Error(String(error)));
      });
    });
    child.on('exit', (code) => {
      clearTimeout(timer);
      void pending.then(() => (code === 0 ? resolve(lines) : reject(new Error(`client.py exited with ${code}: ${stderr}`))));
    });
  });
}

/** The user approves on our pages, picking the phrase the device shows. */
async function approve(line: Line): Promise<undefined> {
  const complete = new URL(String(line.verification_uri_complete));
  const codeStep = await browser.get(`${complete.pathname}${complete.search}`);
  expect(codeStep.statusCode, codeStep.body).toBe(200);
  const approval = await browser.post(complete.pathname, { user_code: String(line.user_code) });
  expect(approval.statusCode, approval.body).toBe(200);
  const result = await browser.post(`${complete.pathname}/decision`, {
    user_code: inputValue(approval.body, 'user_code'),
    request_handle: inputValue(approval.body, 'request_handle'),
    action: 'approve',
    phrase: String(line.confirmation_phrase),
  });
  expect(result.body).toContain('is now connected to your account.');
  return undefined;
}

describe('python3-authlib: device flow (RFC 8628)', () => {
  it.each(['public', 'confidential'] as const)(
    'a %s app signs in, refreshes once its access token has expired, and revocation ends the grant',
    async (type) => {
      const app = await seedClient(t, { kind: 'tv', type, name: `Python ${type}` });
      const lines = await runScript(['device', issuer, app.clientId], app.clientSecret, async (line) => (line.step === 'code' ? approve(line) : undefined));
      const byStep = Object.fromEntries(lines.map((line) => [line.step, line]));
      expect(byStep.tokens).toMatchObject({ scope: 'openid email offline_access', expires_in: ACCESS_TOKEN_TTL, slow_downs: 0 });
      expect(byStep.refreshed).toMatchObject({
        userinfo_status: 200,
        sub: user.userId,
        new_access_token: true,
        new_refresh_token: true,
        expired_access_status: 401,
      });
      expect(byStep.revoked).toMatchObject({ revocation_status: 200, userinfo_status: 401, refresh: 'invalid_grant' });
    },
    RUN_BOUND_MS,
  );
});

describe('python3-authlib: code flow with PKCE', () => {
  it.each(['client_secret_basic', 'client_secret_post'] as const)(
    'a confidential web app signs in with %s, verifies the ID token against the JWKS, and revokes its access token',
    async (method) => {
      const redirectUri = 'http://127.0.0.1:8765/callback';
      const app = await seedClient(t, {
        kind: 'web',
        type: 'confidential',
        name: `Python web (${method})`,
        grantTypes: ['authorization_code'],
        redirectUris: [redirectUri],
      });
      const lines = await runScript(['code', issuer, app.clientId, method, redirectUri], app.clientSecret, async (line) => {
        if (line.step !== 'authorize') return undefined;
        const url = new URL(String(line.url));
        expect(url.searchParams.get('code_challenge_method')).toBe('S256');
        const consent = await browser.get(`${url.pathname}${url.search}`);
        const back = await answerConsent(browser, consent, 'allow');
        expect(back.statusCode, back.body).toBe(303);
        const location = String(back.headers.location);
        expect(location.startsWith(`${redirectUri}?`)).toBe(true);
        return location;
      });
      expect(lines.at(-1)).toMatchObject({
        step: 'signed_in',
        sub: user.userId,
        email: user.email,
        userinfo_status: 200,
        revocation_status: 200,
        userinfo_after_revocation: 401,
      });
    },
    RUN_BOUND_MS,
  );
});
