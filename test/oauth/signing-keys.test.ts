import { createLocalJWKSet, decodeProtectedHeader, jwtVerify, type JSONWebKeySet } from 'jose';
import type { FastifyInstance } from 'fastify';
import { sql } from 'kysely';
import { afterEach, describe, expect, it } from 'vitest';
import { buildAdminApp } from '../../src/admin-app.js';
import { announcementSeconds } from '../../src/keys/signing-keys.js';
import { seedClient, seedUser, startTestApp, type TestApp } from '../helpers/app.js';
import { refreshed, signIn, type TestClient } from '../helpers/tokens.js';

/**
 * Issue 22 §3: signing keys move next -> active -> retired on their own, a key is published at
 * least one JWKS cache lifetime before it signs, a retired key verifies its tokens until they
 * expire, and an emergency revocation takes a key out at once on every instance.
 */

const DAY = 86400;
const ROTATING = { SIGNING_KEY_ROTATION_DAYS: '1', JWKS_CACHE_SECONDS: '300', ID_TOKEN_TTL: '3600' };

const opened: TestApp[] = [];
afterEach(async () => {
  // The second instance first: it shares the first one's database.
  for (const t of opened.reverse()) await t.close();
  opened.length = 0;
});

async function start(options: Parameters<typeof startTestApp>[0] = {}) {
  const t = await startTestApp({ ...options, env: { ...ROTATING, ...options.env } });
  opened.push(t);
  return t;
}

async function jwks(t: TestApp): Promise<JSONWebKeySet> {
  const res = await t.app.inject({ method: 'GET', url: '/.well-known/jwks.json' });
  expect(res.statusCode).toBe(200);
  return res.json();
}

const kids = (set: JSONWebKeySet) => set.keys.map((k) => k.kid!);

async function verifies(t: TestApp, idToken: string, clientId: string): Promise<boolean> {
  try {
    await jwtVerify(idToken, createLocalJWKSet(await jwks(t)), { issuer: t.config.issuer, audience: clientId, currentDate: t.clock.now() });
    return true;
  } catch {
    return false;
  }
}

async function rowCount(t: TestApp): Promise<number> {
  const { rows } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM signing_keys`.execute(t.deps.db);
  return rows[0]!.n;
}

/** Waits, boundedly, until `t` has reloaded its keys since `before` (an announcement arrived). */
async function reloadedSince(t: TestApp, before: number) {
  const started = Date.now();
  for (let turn = 0; turn < 1000 && t.deps.keys.reloads === before; turn++) {
    if (Date.now() - started > 5_000) throw new Error('no reload within 5 s');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

function adminOf(t: TestApp): Promise<FastifyInstance> {
  return buildAdminApp(t.deps, { listener: 'socket', logger: false });
}

async function signedIn(t: TestApp) {
  const tv: TestClient = await seedClient(t, { kind: 'tv' });
  const user = await seedUser(t);
  return { tv, user, tokens: await signIn(t, tv, user.userId) };
}

describe('signing keys', () => {
  it('the first key of a fresh database signs at once, and a next key is published beside it', async () => {
    const t = await start();
    const set = await jwks(t);
    expect(set.keys).toHaveLength(2);
    const { tokens } = await signedIn(t);
    const kid = decodeProtectedHeader(tokens.id_token!).kid!;
    expect(kid).toBe(t.deps.keys.signingKey().kid);
    expect(kids(set)).toContain(kid);
    const states = (await t.deps.db.selectFrom('signing_keys').select(['kid', 'activates_at']).execute()).map((k) => k.activates_at === null);
    expect(states.sort()).toEqual([false, true]);
  });

  it('the JWKS never serves a key that signs before it was announced: over several rotations, each signing kid was published a JWKS cache lifetime earlier', async () => {
    const t = await start();
    const { tv, tokens } = await signedIn(t);
    const firstSeen = new Map<string, number>();
    const signed: { kid: string; at: number }[] = [];
    let refreshToken = tokens.refresh_token!;
    // The first key signs from the start: there was no JWKS before it for a verifier to hold.
    for (const kid of kids(await jwks(t))) firstSeen.set(kid, t.clock.now().getTime());
    // Half-hour steps over days (a rotation a day), then a rotation by hand and minute steps
    // through its announcement window, then days again. Bounded: 250 steps.
    const phases = [
      { steps: 100, seconds: 1800, rotateFirst: false },
      { steps: 12, seconds: 60, rotateFirst: true },
      { steps: 138, seconds: 1800, rotateFirst: false },
    ];
    for (const phase of phases) {
      if (phase.rotateFirst) {
        // A fresh next key, made this instant, so the rotation must wait its announcement out.
        await t.deps.keys.maintain(true);
        const next = await t.deps.keys.maintain(true);
        expect(next.next?.activates_at).not.toBeNull();
      }
      for (let step = 0; step < phase.steps; step++) {
        t.clock.advance(phase.seconds);
        await t.deps.keys.maintain();
        const now = t.clock.now().getTime();
        for (const kid of kids(await jwks(t))) if (!firstSeen.has(kid)) firstSeen.set(kid, now);
        const next = await refreshed(t, tv, refreshToken);
        refreshToken = next.refresh_token!;
        signed.push({ kid: decodeProtectedHeader(next.id_token!).kid!, at: now });
        expect(await verifies(t, next.id_token!, tv.clientId)).toBe(true);
      }
    }
    const signers = new Set(signed.map((s) => s.kid));
    expect(signers.size).toBeGreaterThanOrEqual(5);
    const cache = t.deps.keys.policy.jwksCacheSeconds * 1000;
    for (const { kid, at } of signed) {
      expect(firstSeen.get(kid), kid).toBeDefined();
      expect(at - firstSeen.get(kid)!, `${kid} signed ${(at - firstSeen.get(kid)!) / 1000} s after it was first published`).toBeGreaterThanOrEqual(cache);
    }
  });

  it('a rotation by hand waits until the next key has been published for the cache lifetime and a reload', async () => {
    const t = await start();
    const first = t.deps.keys.signingKey().kid;
    // Made this instant: a rotation now must not let it sign yet.
    await t.deps.db.deleteFrom('signing_keys').where('activates_at', 'is', null).execute();
    await t.deps.keys.maintain();
    const schedule = await t.deps.keys.maintain(true);
    const wait = announcementSeconds(t.deps.keys.policy);
    expect(schedule.next!.activates_at!.getTime() - t.clock.now().getTime()).toBe(wait * 1000);
    t.clock.advance(wait - 1);
    expect(t.deps.keys.signingKey().kid).toBe(first);
    t.clock.advance(1);
    expect(t.deps.keys.signingKey().kid).toBe(schedule.next!.kid);
  });

  it('a retired key’s ID tokens still verify until ID_TOKEN_TTL after it retired, then the key is gone', async () => {
    const t = await start();
    const { tv, tokens } = await signedIn(t);
    const old = t.deps.keys.signingKey().kid;
    t.clock.advance(DAY - 600);
    const lastOfOld = await refreshed(t, tv, tokens.refresh_token!);
    expect(decodeProtectedHeader(lastOfOld.id_token!).kid).toBe(old);

    // The rotation is due: the next key has been published for a day, so it takes over now.
    t.clock.advance(600);
    await t.deps.keys.maintain();
    const successor = await refreshed(t, tv, lastOfOld.refresh_token!);
    expect(decodeProtectedHeader(successor.id_token!).kid).not.toBe(old);

    // The old key's last token lives until 50 min after the retirement; the key stays published
    // until an hour after it.
    t.clock.advance(3000 - 5);
    await t.deps.keys.maintain();
    expect(kids(await jwks(t))).toContain(old);
    expect(await verifies(t, lastOfOld.id_token!, tv.clientId)).toBe(true);

    t.clock.advance(600 + 5);
    await t.deps.keys.maintain();
    expect(kids(await jwks(t))).not.toContain(old);
    expect(await t.deps.db.selectFrom('signing_keys').select('kid').where('kid', '=', old).execute()).toEqual([]);
    expect(await verifies(t, successor.id_token!, tv.clientId)).toBe(false); // expired by now
  });

  it('rotation by one instance at a time: several instances running the maintenance at once make exactly one new key', async () => {
    const a = await start();
    const b = await start({ database: a.database });
    // One moment for both: with b's clock ahead, the rotation a schedules would already have
    // happened for b, which would then rightly make the next key after it.
    b.clock.advance((a.clock.now().getTime() - b.clock.now().getTime()) / 1000);
    expect(await rowCount(a)).toBe(2);
    const before = a.deps.keys.signingKey().kid;
    a.clock.advance(DAY + 1);
    b.clock.advance(DAY + 1);
    const runs = await Promise.all([a, b, a, b, a, b].map((t) => t.deps.keys.maintain()));
    expect(runs.flatMap((r) => r.created)).toHaveLength(1);
    expect(new Set(runs.map((r) => r.active)).size).toBe(1);
    expect(runs[0]!.active).not.toBe(before);
    // The retired key, the one signing now, one next.
    expect(await rowCount(a)).toBe(3);
    await a.deps.keys.reload();
    await b.deps.keys.reload();
    expect(b.deps.keys.signingKey().kid).toBe(a.deps.keys.signingKey().kid);
  });

  it('a revoked key leaves the JWKS of every instance at once and signing moves to the next key; a new next key is made', async () => {
    const a = await start();
    const b = await start({ database: a.database });
    const { tv, tokens } = await signedIn(b);
    const revoked = a.deps.keys.signingKey().kid;
    const next = kids(await jwks(a)).find((kid) => kid !== revoked)!;
    const admin = await adminOf(a);
    const heardBefore = b.deps.keys.reloads;
    const res = await admin.inject({ method: 'POST', url: `/admin/keys/${revoked}/revoke` });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ active: next });
    await reloadedSince(b, heardBefore);
    for (const t of [a, b]) {
      const set = kids(await jwks(t));
      expect(set).not.toContain(revoked);
      expect(set).toContain(next);
      expect(set).toHaveLength(2);
    }
    const after = await refreshed(b, tv, tokens.refresh_token!);
    expect(decodeProtectedHeader(after.id_token!).kid).toBe(next);
    // Nothing left to sign with: the private half is gone from the row.
    const row = await a.deps.db
      .selectFrom('signing_keys')
      .select(['private_key_sealed', 'private_jwk', 'revoked_at'])
      .where('kid', '=', revoked)
      .executeTakeFirstOrThrow();
    expect(row).toMatchObject({ private_key_sealed: null, private_jwk: null });
    expect(row.revoked_at).not.toBeNull();
    await admin.close();
  });

  it('refuses to revoke the only key that can sign, with a clear error', async () => {
    const t = await start();
    await t.deps.db.deleteFrom('signing_keys').where('activates_at', 'is', null).execute();
    await t.deps.keys.reload();
    const only = t.deps.keys.signingKey().kid;
    const admin = await adminOf(t);
    const res = await admin.inject({ method: 'POST', url: `/admin/keys/${only}/revoke` });
    expect(res.statusCode).toBe(409);
    expect(res.json().detail).toMatch(/only key that can sign/);
    expect(t.deps.keys.signingKey().kid).toBe(only);
    await admin.close();
  });
});
