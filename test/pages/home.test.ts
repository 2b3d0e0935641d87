import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { startTestApp, type TestApp } from '../helpers/app.js';

/** Issue 20 §4: `/` is a small home page; the operator names the service and gives its logo. */

const folder = mkdtempSync(path.join(tmpdir(), 'device-auth-home-'));
afterAll(() => rmSync(folder, { recursive: true, force: true }));
let t: TestApp | undefined;
afterEach(async () => {
  await t?.close();
  t = undefined;
});

const PNG = Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), Buffer.alloc(32)]);

describe("the home page and the service's name", () => {
  it('/ links to connecting a device or a bot, the devices and the apps, and is no 404', async () => {
    t = await startTestApp();
    const res = await t.app.inject({ method: 'GET', url: '/' });
    expect(res.statusCode).toBe(200);
    for (const href of ['/activate', '/activate/bot', '/account/devices', '/account/apps']) expect(res.body).toContain(`href="${href}"`);
    expect(res.body).toContain('<title>Home · device-auth</title>');
  });

  it('SERVICE_NAME names every page; SERVICE_LOGO_FILE is served from our own origin with its type, sandboxed', async () => {
    const logo = path.join(folder, 'logo.png');
    writeFileSync(logo, PNG);
    t = await startTestApp({ env: { SERVICE_NAME: 'Acme TV Sign-in', SERVICE_LOGO_FILE: logo } });
    for (const url of ['/', '/signin']) {
      const page = await t.app.inject({ method: 'GET', url });
      expect(page.body).toContain('· Acme TV Sign-in</title>');
      expect(page.body).toContain('<img src="/static/logo" alt="" height="24"> Acme TV Sign-in</a>');
    }
    const served = await t.app.inject({ method: 'GET', url: '/static/logo' });
    expect(served.statusCode).toBe(200);
    expect(served.headers['content-type']).toBe('image/png');
    expect(served.headers['content-security-policy']).toBe("default-src 'none'; sandbox");
    expect(served.rawPayload.equals(PNG)).toBe(true);
  });

  it('a logo that is not an image, or too large, stops the start with a line naming it; a logo on another host is refused', async () => {
    const text = path.join(folder, 'logo.svg');
    writeFileSync(text, '<svg onload="alert(1)"/>');
    await expect(startTestApp({ env: { SERVICE_LOGO_FILE: text } })).rejects.toThrow(/SERVICE_LOGO_FILE .* is not a PNG, JPEG, GIF or WebP image/);
    const big = path.join(folder, 'big.png');
    writeFileSync(big, Buffer.concat([PNG, Buffer.alloc(300 * 1024)]));
    await expect(startTestApp({ env: { SERVICE_LOGO_FILE: big } })).rejects.toThrow(/larger than 256 KB/);
    expect(() => loadConfig({ SERVICE_LOGO_URL: 'https://evil.example/logo.png' })).toThrow(/SERVICE_LOGO_URL: must be a path on this server/);
    expect(() => loadConfig({ SERVICE_LOGO_URL: '//evil.example/logo.png' })).toThrow(/SERVICE_LOGO_URL/);
    expect(() => loadConfig({ SERVICE_NAME: 'Acme\u0000' })).toThrow(/SERVICE_NAME/);
  });
});
