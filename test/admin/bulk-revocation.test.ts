import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { seedClient, seedUser, startTestApp, type TestApp } from '../helpers/app.js';
import { adminCall, seedGrants, startOriginApp, type OriginApp } from '../helpers/grant-origins.js';
import { introspection, refresh, signIn, userinfo } from '../helpers/tokens.js';

/**
 * Issue 31 §3: undo a campaign in one command. POST /admin/grants/revoke with the filters of §1:
 * a dry run counts and shows, the revocation revokes in batches of 1,000, each grant once, each
 * with an operator_revoked event naming the operation, and the tokens stop at the next request.
 */

vi.setConfig({ testTimeout: 90_000, hookTimeout: 180_000 });

// One app for the file (a fresh database costs seconds, the embedded one most): each test works
// on apps of its own and counts only their grants.
let o: OriginApp;
let second: TestApp | undefined;
beforeAll(async () => {
  o = await startOriginApp();
});
afterAll(async () => {
  await second?.close();
  await o?.close();
});

const revoke = (body: unknown) => adminCall(o, 'POST', '/admin/grants/revoke', body);

const liveCount = async (t: TestApp, clientIds: string[]) =>
  (
    await t.deps.db
      .selectFrom('grants')
      .select(sql<number>`count(*)::int`.as('n'))
      .where('revoked_at', 'is', null)
      .where('client_id', 'in', clientIds)
      .executeTakeFirstOrThrow()
  ).n;

const operatorEvents = (t: TestApp, clientIds: string[]) =>
  t.deps.db
    .selectFrom('events')
    .select(['grant_id', 'reason', 'data', 'client_ip'])
    .where('type', '=', 'grant.revoked')
    .where('client_id', 'in', clientIds)
    .execute();

describe('§3 dry run, then the revocation', () => {
  it('the dry run counts and shows ten, revoking nothing; the revocation revokes all 2,500 in batches, each with one operator_revoked event naming the operation', async () => {
    const tv = await seedClient(o.t, { kind: 'tv' });
    const other = await seedClient(o.t, { kind: 'tv', name: 'Other TV' });
    const user = await seedUser(o.t);
    await seedGrants(o.t, tv.clientId, user.userId, 2500);
    await seedGrants(o.t, other.clientId, user.userId, 5, 64501);
    const mine = [tv.clientId, other.clientId];

    const dry = await revoke({ asn: [64500], dry_run: true });
    expect(dry.status, JSON.stringify(dry.body)).toBe(200);
    expect(dry.body.count).toBe(2500);
    expect(dry.body.sample).toHaveLength(10);
    expect(dry.body.sample[0]).toMatchObject({ client_id: tv.clientId, requester: { asn: 64500, country: 'NL', hosting: true }, live: true });
    expect(await liveCount(o.t, mine)).toBe(2505);

    const done = await revoke({ asn: [64500] });
    expect(done.status, JSON.stringify(done.body)).toBe(200);
    expect(done.body).toEqual({ revoked: 2500, operation_id: expect.stringMatching(/^[0-9a-f-]{36}$/) });
    expect(await liveCount(o.t, mine)).toBe(5);
    const events = await operatorEvents(o.t, mine);
    expect(events).toHaveLength(2500);
    expect(new Set(events.map((e) => e.grant_id)).size).toBe(2500);
    for (const event of events) expect(event).toMatchObject({ reason: 'operator_revoked', data: { operation_id: done.body.operation_id }, client_ip: null });
    expect((await adminCall(o, 'GET', `/admin/grants/count?asn=64500&live=false`)).body).toEqual({ count: 2500 });

    // Again: nothing left to revoke.
    expect((await revoke({ asn: [64500] })).body).toMatchObject({ revoked: 0 });
    expect(await operatorEvents(o.t, mine)).toHaveLength(2500);
  });

  it('a filter that matches nothing revokes nothing; a filter with no condition (none, or only live) is refused, revoking nothing', async () => {
    const tv = await seedClient(o.t, { kind: 'tv' });
    const user = await seedUser(o.t);
    await seedGrants(o.t, tv.clientId, user.userId, 20, 64510);
    expect(await revoke({ country: 'JP' })).toMatchObject({ status: 200, body: { revoked: 0 } });
    expect(await revoke({ country: 'JP', dry_run: true })).toMatchObject({ status: 200, body: { count: 0, sample: [] } });
    for (const body of [{}, { live: true }, { dry_run: false }, { live: false, dry_run: false }]) {
      const res = await revoke(body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.detail).toContain('at least one condition');
    }
    expect(await liveCount(o.t, [tv.clientId])).toBe(20);
    expect(await operatorEvents(o.t, [tv.clientId])).toEqual([]);
  });

  it('hostile bodies: a clear 400 and nothing revoked', async () => {
    const tv = await seedClient(o.t, { kind: 'tv' });
    const user = await seedUser(o.t);
    await seedGrants(o.t, tv.clientId, user.userId, 20, 64520);
    const bodies: [string, unknown][] = [
      ['a NUL in the user', { user: 'a\u0000@example.test' }],
      ['a lone surrogate in the user', { user: '\ud800@example.test' }],
      ['a NUL in a client id', { client: [`${tv.clientId}\u0000`] }],
      ['a lone surrogate in a client id', { client: `tv_\udc00` }],
      ['an unknown country among good ones', { country: ['NL', 'QQ'] }],
      ['an ASN out of range', { asn: [4294967296] }],
      ['a negative ASN', { asn: -1 }],
      ['a fractional ASN', { asn: [64500.5] }],
      ['a huge list', { asn: Array.from({ length: 10_000 }, (_, i) => i) }],
      ['a long text', { user: `${'a'.repeat(5_000)}@example.test` }],
      ['an unknown signal', { signal: ['phished'] }],
      ['a field the API does not know', { asn: [64500], everything: true }],
      ['dry_run as text', { asn: [64500], dry_run: 'yes' }],
    ];
    for (const [name, body] of bodies) {
      const res = await revoke(body);
      expect(res.status, `${name}: ${JSON.stringify(res.body)}`).toBe(400);
      expect(res.body.type, name).toBe('urn:device-auth:problem:invalid-input');
    }
    const invalidUtf8 = await fetch(`${o.adminUrl}/admin/grants/revoke`, {
      method: 'POST',
      headers: { authorization: `Bearer ${(await import('../helpers/grant-origins.js')).ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: Buffer.concat([Buffer.from('{"user":"a'), Buffer.from([0xc3, 0x28]), Buffer.from('@example.test"}')]),
    });
    expect(invalidUtf8.status).toBe(400);
    // Past the admin API's body limit: refused before it is parsed.
    expect((await revoke({ user: `${'a'.repeat(2_000_000)}@example.test` })).status).toBe(413);
    expect(await liveCount(o.t, [tv.clientId])).toBe(20);
    expect(await operatorEvents(o.t, [tv.clientId])).toEqual([]);
  });
});

describe('§3 concurrency and every instance', () => {
  it('two bulk revocations at once (real concurrent requests) revoke each grant once', async () => {
    const tv = await seedClient(o.t, { kind: 'tv' });
    const user = await seedUser(o.t);
    await seedGrants(o.t, tv.clientId, user.userId, 1500, 64530);
    // Different filters over the same grants, so neither answer can be a copy of the other's.
    const [first, secondAnswer] = await Promise.all([revoke({ asn: [64530] }), revoke({ client: [tv.clientId], country: ['NL'] })]);
    expect(first.status).toBe(200);
    expect(secondAnswer.status).toBe(200);
    expect(first.body.revoked + secondAnswer.body.revoked).toBe(1500);
    expect(first.body.operation_id).not.toBe(secondAnswer.body.operation_id);
    const events = await operatorEvents(o.t, [tv.clientId]);
    expect(events).toHaveLength(1500);
    expect(new Set(events.map((e) => e.grant_id)).size).toBe(1500);
    expect(await liveCount(o.t, [tv.clientId])).toBe(0);
  });

  it("the revoked grants' refresh, userinfo and introspection fail at once on both of two instances of one database; the others keep working", async () => {
    second = await startTestApp({ database: o.t.database });
    const tv = await seedClient(o.t, { kind: 'tv' });
    const keep = await seedClient(o.t, { kind: 'tv', name: 'Kept TV' });
    const rs = await seedClient(o.t, { kind: 'web', type: 'confidential', name: 'Photo API' });
    const user = await seedUser(o.t);
    const revoked = [await signIn(o.t, tv, user.userId), await signIn(o.t, tv, user.userId)];
    const kept = await signIn(o.t, keep, user.userId);
    // Both instances have used the tokens (and so cached whatever they cache) before the revocation.
    for (const instance of [o.t, second]) {
      for (const tokens of [...revoked, kept]) {
        expect((await userinfo(instance, tokens.access_token)).statusCode).toBe(200);
        expect(await introspection(instance, rs, tokens.access_token)).toMatchObject({ active: true });
      }
    }
    expect(await revoke({ client: [tv.clientId] })).toMatchObject({ status: 200, body: { revoked: 2 } });
    for (const instance of [o.t, second]) {
      for (const tokens of revoked) {
        expect((await userinfo(instance, tokens.access_token)).statusCode).toBe(401);
        expect(await introspection(instance, rs, tokens.access_token)).toEqual({ active: false });
        const refused = await refresh(instance, tv, tokens.refresh_token!);
        expect(refused.statusCode).toBe(400);
        expect(refused.json().error).toBe('invalid_grant');
      }
      expect((await userinfo(instance, kept.access_token)).statusCode).toBe(200);
      expect(await introspection(instance, rs, kept.access_token)).toMatchObject({ active: true });
    }
    expect((await refresh(second, keep, kept.refresh_token!)).statusCode).toBe(200);
  });
});
