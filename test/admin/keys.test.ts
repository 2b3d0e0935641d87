import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildAdminApp } from '../../src/admin-app.js';
import { startTestApp, type TestApp } from '../helpers/app.js';

/** Issue 22 §3: the signing keys in the admin API; hostile input in a kid is a 400 or 404, never a 500. */

let t: TestApp;
let admin: FastifyInstance;
beforeAll(async () => {
  t = await startTestApp();
  admin = await buildAdminApp(t.deps, { listener: 'socket', logger: false });
});
afterAll(async () => {
  await admin.close();
  await t.close();
});

describe('admin API: signing keys', () => {
  it('GET /admin/keys lists every key with its state; POST /admin/keys/rotate schedules the next key', async () => {
    const listed = await admin.inject({ method: 'GET', url: '/admin/keys' });
    expect(listed.statusCode).toBe(200);
    const { items } = listed.json();
    expect(items.map((k: { state: string }) => k.state).sort()).toEqual(['active', 'next']);
    const rotated = await admin.inject({ method: 'POST', url: '/admin/keys/rotate' });
    expect(rotated.statusCode, rotated.body).toBe(200);
    const body = rotated.json();
    expect(body.next.activates_at).not.toBeNull();
    expect(body.keys.find((k: { kid: string }) => k.kid === body.active).retired_at).toBe(body.next.activates_at);
    // Rotating again while one is scheduled changes nothing.
    expect((await admin.inject({ method: 'POST', url: '/admin/keys/rotate' })).json().next).toEqual(body.next);
  });

  it.each([
    ['an unknown kid', 'AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA', 404],
    ['NUL', '%00', 400],
    ['a lone surrogate (CESU bytes)', '%ED%A0%80', 400],
    ['invalid UTF-8', '%FF', 400],
    ['an overlong form', '%C0%AF', 400],
    ['a space', 'a%20b', 400],
    ['an overlong kid', 'a'.repeat(5000), 400],
  ])('revoke with %s answers %i, never a 500', async (_what, kid, status) => {
    const res = await admin.inject({ method: 'POST', url: `/admin/keys/${kid}/revoke` });
    expect(res.statusCode, res.body).toBe(status);
    expect(res.headers['content-type']).toContain('application/problem+json');
  });
});
