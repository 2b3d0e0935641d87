import type { FastifyInstance } from 'fastify';
import { decodeJwt } from 'jose';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { buildAdminApp } from '../../src/admin-app.js';
import { seedUser, startTestApp, type TestApp } from '../helpers/app.js';
import { signedInBrowser } from '../helpers/browser.js';
import { createStream, fanOutCommitted, pollStream, SESSION_REVOKED, seedReceiver, ssfCall, type TestReceiver, verifySet } from '../helpers/ssf.js';
import { grantOf, refresh, refreshed, revoke, signIn } from '../helpers/tokens.js';

/**
 * Issue 32 §3: what the transmitter says, and to whom. Events of the log become SETs (CAEP
 * session-revoked for every grant that ends), signed with the server's keys, aud the receiver,
 * sub_id in the stream's format, delivered by poll (RFC 8936) with acknowledgements; a receiver
 * hears only of its own users unless the operator lets it hear of everyone.
 */

let t: TestApp;
let admin: FastifyInstance;
/** A TV app that users sign in to, which is also a Shared Signals receiver (confidential, client_credentials). */
let tv: TestReceiver;
/** Another app with users of its own, also a receiver. */
let bot: TestReceiver;
let jwks: { keys: unknown[] };

type User = Awaited<ReturnType<typeof seedUser>>;

const ISSUER = 'http://localhost:3000';

const fanOut = () => fanOutCommitted(t);

/** A device of `app` signed in to `user`'s account: its tokens and grant. */
async function device(app: TestReceiver, user: User) {
  const tokens = await signIn(t, app, user.userId, 'openid offline_access');
  return { ...tokens, grantId: (await grantOf(t, tokens.access_token)).grant_id };
}

/** Signs the device out on the user's Devices page, as the user would. */
async function signOutOnDevicesPage(user: User, grantId: string) {
  const browser = await signedInBrowser(t, user);
  expect((await browser.get('/account/devices')).statusCode).toBe(200);
  expect((await browser.post('/account/devices/sign-out', { grant_id: grantId })).statusCode).toBe(303);
}

/** Polls, verifies every SET against the published JWKS, and acknowledges them all. */
async function drain(receiver: TestReceiver, streamId: string) {
  const polled = await pollStream(t, receiver, streamId, { maxEvents: 100 });
  const payloads = [];
  for (const [jti, set] of Object.entries(polled.sets)) {
    const payload = await verifySet(jwks, set, receiver.clientId);
    expect(payload.jti).toBe(jti);
    payloads.push(payload);
  }
  await pollStream(t, receiver, streamId, { ack: Object.keys(polled.sets), maxEvents: 0 });
  return payloads as Array<Record<string, any>>;
}

const adminPatch = (clientId: string, body: unknown) =>
  admin.inject({ method: 'PATCH', url: `/admin/clients/${clientId}`, headers: { 'content-type': 'application/json' }, payload: JSON.stringify(body) });

const receiverApp = (name: string, kind: 'tv' | 'bot') =>
  seedReceiver(t, {
    kind,
    name,
    scopes: ['openid', 'offline_access', 'ssf.manage'],
    grantTypes: ['urn:ietf:params:oauth:grant-type:device_code', 'refresh_token', 'client_credentials'],
  });

beforeAll(async () => {
  t = await startTestApp();
  admin = await buildAdminApp(t.deps, { listener: 'socket', logger: false });
  tv = await receiverApp('Living Room TV', 'tv');
  bot = await receiverApp('Helper Bot', 'bot');
  jwks = (await t.app.inject({ method: 'GET', url: '/.well-known/jwks.json' })).json();
  // The consumer starts at the present: what came before its first look is not its business.
  await fanOut();
});
afterAll(async () => {
  await admin?.close();
  await t?.close();
});
// Each test's streams go with it (a receiver may have ten).
afterEach(async () => {
  for (const receiver of [tv, bot]) {
    for (const stream of (await ssfCall(t, receiver.token, 'GET', '/ssf/stream')).json()) {
      await ssfCall(t, receiver.token, 'DELETE', `/ssf/stream?stream_id=${stream.stream_id}`);
    }
  }
});

describe('session-revoked (CAEP 1.0 §3.1)', () => {
  it("a Devices-page sign-out becomes a signed SET naming the grant's session, for the app's receiver", async () => {
    const stream = await createStream(t, tv, { format: 'complex' });
    const user = await seedUser(t);
    const tvDevice = await device(tv, user);
    await fanOut();
    expect(await drain(tv, stream.stream_id)).toEqual([]);

    // The session is the one the device's ID token names as sid.
    expect(decodeJwt(tvDevice.id_token!).sid).toBe(tvDevice.grantId);
    await signOutOnDevicesPage(user, tvDevice.grantId);
    await fanOut();
    const [set, ...more] = await drain(tv, stream.stream_id);
    expect(more).toEqual([]);
    expect(set).toEqual({
      iss: ISSUER,
      jti: expect.stringMatching(/^[A-Za-z0-9_-]{16,}$/),
      iat: expect.any(Number),
      aud: tv.clientId,
      txn: expect.any(String),
      sub_id: {
        format: 'complex',
        user: { format: 'iss_sub', iss: ISSUER, sub: user.userId },
        session: { format: 'opaque', id: tvDevice.grantId },
      },
      events: {
        [SESSION_REVOKED]: {
          event_timestamp: expect.any(Number),
          initiating_entity: 'user',
          reason_admin: { en: 'The user signed the device out on the Devices page' },
        },
      },
    });
  });

  it('every way a grant ends is a session-revoked, with who ended it and why', async () => {
    const stream = await createStream(t, tv);
    const user = await seedUser(t, `ends-${Date.now()}@example.test`);
    const signedOut = await device(tv, user);
    const revokedByApp = await device(tv, user);
    const reused = await device(tv, user);
    const removed = await device(tv, user);

    await signOutOnDevicesPage(user, signedOut.grantId);
    expect((await revoke(t, tv, revokedByApp.refresh_token!)).statusCode).toBe(200);
    await refreshed(t, tv, reused.refresh_token!);
    t.clock.advance(t.config.refreshRetryWindow + 1);
    expect((await refresh(t, tv, reused.refresh_token!)).json().error).toBe('invalid_grant');
    const browser = await signedInBrowser(t, user);
    await browser.get('/account/apps');
    expect((await browser.post('/account/apps/remove', { client_id: tv.clientId })).statusCode).toBe(303);
    await fanOut();

    const sets = await drain(tv, stream.stream_id);
    const told = sets.map((set) => [set.sub_id.session.id, set.events[SESSION_REVOKED].initiating_entity, set.events[SESSION_REVOKED].reason_admin.en]);
    expect(told).toEqual([
      [signedOut.grantId, 'user', 'The user signed the device out on the Devices page'],
      [revokedByApp.grantId, 'user', 'The app revoked the grant (RFC 7009)'],
      [reused.grantId, 'policy', 'A refresh token was used again after it was replaced; the grant was revoked for safety'],
      [removed.grantId, 'user', "The user removed the app's access on the Connected apps page"],
    ]);
    for (const set of sets) expect(set.sub_id.user).toEqual({ format: 'iss_sub', iss: ISSUER, sub: user.userId });

    const banned = await device(tv, user);
    const ban = await admin.inject({ method: 'POST', url: `/admin/users/${encodeURIComponent(user.email)}/ban` });
    expect(ban.statusCode, ban.body).toBe(200);
    await fanOut();
    const [bannedSet] = await drain(tv, stream.stream_id);
    expect(bannedSet?.sub_id.session.id).toBe(banned.grantId);
    expect(bannedSet?.events[SESSION_REVOKED]).toMatchObject({ initiating_entity: 'admin', reason_admin: { en: 'The user was banned' } });
  });

  it("an operator's bulk revocation is a session-revoked from the admin, naming the operation", async () => {
    const stream = await createStream(t, tv);
    const user = await seedUser(t, `bulk-${Date.now()}@example.test`);
    t.clock.advance(1);
    const from = t.clock.now().toISOString();
    const campaign = await device(tv, user);
    const bulk = await admin.inject({ method: 'POST', url: '/admin/grants/revoke', payload: { client: tv.clientId, approved_after: from } });
    expect(bulk.statusCode, bulk.body).toBe(200);
    await fanOut();
    const sets = await drain(tv, stream.stream_id);
    expect(sets.map((set) => [set.sub_id.session.id, set.events[SESSION_REVOKED].initiating_entity, set.events[SESSION_REVOKED].reason_admin.en])).toEqual([
      [campaign.grantId, 'admin', "An operator revoked the grant (the admin API's bulk revocation)"],
    ]);
  });

  it('the user is named in the format the stream asks for; the session always beside them', async () => {
    const user = await seedUser(t, `formats-${Date.now()}@example.test`);
    const streams = {
      iss_sub: await createStream(t, tv, { format: 'iss_sub' }),
      email: await createStream(t, tv, { format: 'email' }),
      opaque: await createStream(t, tv, { format: 'opaque' }),
      complex: await createStream(t, tv, { format: 'complex' }),
    };
    const grant = await device(tv, user);
    await signOutOnDevicesPage(user, grant.grantId);
    await fanOut();
    const session = { format: 'opaque', id: grant.grantId };
    const expected = {
      iss_sub: { format: 'complex', user: { format: 'iss_sub', iss: ISSUER, sub: user.userId }, session },
      email: { format: 'complex', user: { format: 'email', email: user.email }, session },
      opaque: { format: 'complex', user: { format: 'opaque', id: user.userId }, session },
      complex: { format: 'complex', user: { format: 'iss_sub', iss: ISSUER, sub: user.userId }, session },
    };
    for (const [format, stream] of Object.entries(streams)) {
      const sets = await drain(tv, stream.stream_id);
      expect(sets.map((set) => set.sub_id)).toEqual([expected[format as keyof typeof expected]]);
      await ssfCall(t, tv.token, 'DELETE', `/ssf/stream?stream_id=${stream.stream_id}`);
    }
  });

  it('the first stream of a server gets every event from its creation on, though the fan-out had never looked before', async () => {
    const fresh = await startTestApp();
    try {
      const app = await seedReceiver(fresh, {
        kind: 'tv',
        scopes: ['openid', 'offline_access', 'ssf.manage'],
        grantTypes: ['urn:ietf:params:oauth:grant-type:device_code', 'refresh_token', 'client_credentials'],
      });
      const person = await seedUser(fresh);
      const tokens = await signIn(fresh, app, person.userId, 'openid offline_access');
      const stream = await createStream(fresh, app);
      expect((await revoke(fresh, app, tokens.refresh_token!)).statusCode).toBe(200);
      await fanOutCommitted(fresh);
      const polled = await pollStream(fresh, app, stream.stream_id);
      expect(Object.keys(polled.sets)).toHaveLength(1);
    } finally {
      await fresh.close();
    }
  });

  it('a stream that did not request session-revoked gets none; a stream made after the event does not get it', async () => {
    const user = await seedUser(t);
    const grant = await device(tv, user);
    const other = await createStream(t, tv, { events_requested: ['https://schemas.openid.net/secevent/caep/event-type/credential-change'] });
    await signOutOnDevicesPage(user, grant.grantId);
    t.clock.advance(1);
    const later = await createStream(t, tv);
    await fanOut();
    expect(await drain(tv, other.stream_id)).toEqual([]);
    expect(await drain(tv, later.stream_id)).toEqual([]);
  });
});

describe('who hears of whom', () => {
  it("a receiver hears only of its own app's grants; the operator's switch lets it hear of every user", async () => {
    const tvStream = await createStream(t, tv);
    const botStream = await createStream(t, bot);
    const user = await seedUser(t);
    const tvGrant = await device(tv, user);
    const botGrant = await device(bot, user);
    await signOutOnDevicesPage(user, tvGrant.grantId);
    await fanOut();
    expect((await drain(tv, tvStream.stream_id)).map((set) => set.sub_id.session.id)).toEqual([tvGrant.grantId]);
    expect(await drain(bot, botStream.stream_id)).toEqual([]);

    const outsider = await seedUser(t);
    const outsiderGrant = await device(tv, outsider);
    expect((await adminPatch(bot.clientId, { ssf_all_users: true })).json()).toMatchObject({ ssf_all_users: true });
    await signOutOnDevicesPage(outsider, outsiderGrant.grantId);
    await signOutOnDevicesPage(user, botGrant.grantId);
    await fanOut();
    const heard = await drain(bot, botStream.stream_id);
    expect(heard.map((set) => set.sub_id.session.id)).toEqual([outsiderGrant.grantId, botGrant.grantId]);
    // Still its own audience: a SET is addressed to the receiver that gets it.
    for (const set of heard) expect(set.aud).toBe(bot.clientId);
    await adminPatch(bot.clientId, { ssf_all_users: false });
  });

  it('a user the receiver removed from its stream is not told of, until added back; a subject of nobody it knows changes nothing', async () => {
    const stream = await createStream(t, tv);
    const user = await seedUser(t, `removed-${Date.now()}@example.test`);
    const first = await device(tv, user);
    const remove = await ssfCall(t, tv.token, 'POST', '/ssf/subjects/remove', {
      stream_id: stream.stream_id,
      subject: { format: 'email', email: user.email.toUpperCase() },
    });
    expect(remove.statusCode, remove.body).toBe(204);
    await signOutOnDevicesPage(user, first.grantId);
    await fanOut();
    expect(await drain(tv, stream.stream_id)).toEqual([]);

    const add = await ssfCall(t, tv.token, 'POST', '/ssf/subjects/add', {
      stream_id: stream.stream_id,
      subject: { format: 'complex', user: { format: 'iss_sub', iss: ISSUER, sub: user.userId } },
      verified: true,
    });
    expect(add.statusCode, add.body).toBe(200);
    expect(add.body).toBe('');
    const second = await device(tv, user);
    await signOutOnDevicesPage(user, second.grantId);
    await fanOut();
    expect((await drain(tv, stream.stream_id)).map((set) => set.sub_id.session.id)).toEqual([second.grantId]);

    // Not its user, unknown, another issuer's: the same answers, and nothing stored.
    const stranger = await seedUser(t);
    for (const subject of [
      { format: 'email', email: stranger.email },
      { format: 'email', email: 'nobody@example.test' },
      { format: 'iss_sub', iss: 'https://elsewhere.example', sub: user.userId },
      { format: 'opaque', id: 'not-an-id' },
    ]) {
      expect((await ssfCall(t, tv.token, 'POST', '/ssf/subjects/remove', { stream_id: stream.stream_id, subject })).statusCode).toBe(204);
      expect((await ssfCall(t, tv.token, 'POST', '/ssf/subjects/add', { stream_id: stream.stream_id, subject })).statusCode).toBe(200);
    }
    expect(await t.deps.db.selectFrom('ssf_excluded_subjects').selectAll().where('stream_id', '=', stream.stream_id).execute()).toEqual([]);
    const unsupported = await ssfCall(t, tv.token, 'POST', '/ssf/subjects/remove', {
      stream_id: stream.stream_id,
      subject: { format: 'phone_number', phone_number: '+1' },
    });
    expect(unsupported.statusCode).toBe(400);
    const sessionOnly = await ssfCall(t, tv.token, 'POST', '/ssf/subjects/remove', {
      stream_id: stream.stream_id,
      subject: { format: 'complex', session: { format: 'opaque', id: 'x' } },
    });
    expect(sessionOnly.statusCode).toBe(400);
    expect(sessionOnly.json().error_description).toContain('must name its user');
  });
});

describe("a user's own changes (CAEP credential-change, RISC account events)", () => {
  const CREDENTIAL_CHANGE = 'https://schemas.openid.net/secevent/caep/event-type/credential-change';
  const RISC = 'https://schemas.openid.net/secevent/risc/event-type';
  const user = (email: string) => `/admin/users/${encodeURIComponent(email)}`;
  const adminCall = (method: 'PUT' | 'POST' | 'DELETE', url: string, body?: unknown) =>
    admin.inject({ method, url, ...(body !== undefined && { headers: { 'content-type': 'application/json' }, payload: JSON.stringify(body) }) });

  it('an operator setting the password, a ban, an unban and a deletion reach the receivers of the apps the user has used, in order', async () => {
    const mine = await createStream(t, tv, { format: 'email' });
    const complex = await createStream(t, tv, { format: 'complex', events_requested: [CREDENTIAL_CHANGE] });
    const theirs = await createStream(t, bot);
    const person = await seedUser(t, `changes-${Date.now()}@example.test`);
    const { grantId } = await device(tv, person);
    await fanOut();

    expect((await adminCall('PUT', `${user(person.email)}/password`, { password: 'a new long passphrase' })).statusCode).toBe(200);
    expect((await adminCall('POST', `${user(person.email)}/ban`)).statusCode).toBe(200);
    expect((await adminCall('POST', `${user(person.email)}/unban`)).statusCode).toBe(200);
    expect((await adminCall('DELETE', user(person.email))).statusCode).toBe(200);
    await fanOut();

    const told = await drain(tv, mine.stream_id);
    expect(told.map((set) => Object.keys(set.events)[0])).toEqual([
      CREDENTIAL_CHANGE,
      SESSION_REVOKED,
      `${RISC}/account-disabled`,
      `${RISC}/account-enabled`,
      `${RISC}/account-purged`,
    ]);
    expect(told[0]!.events[CREDENTIAL_CHANGE]).toEqual({
      credential_type: 'password',
      change_type: 'update',
      event_timestamp: expect.any(Number),
      initiating_entity: 'admin',
      reason_admin: { en: "An operator set the user's password" },
    });
    expect(told[1]!.events[SESSION_REVOKED]).toMatchObject({ initiating_entity: 'admin', reason_admin: { en: 'The user was banned' } });
    expect(told[1]!.sub_id.session).toEqual({ format: 'opaque', id: grantId });
    // Fanned out after the deletion: the email is gone, so the user is named by iss_sub.
    for (const set of told) expect(set.sub_id.user ?? set.sub_id).toEqual({ format: 'iss_sub', iss: ISSUER, sub: person.userId });
    // The txn of each SET is the event it tells of: SETs of different events never share one.
    expect(new Set(told.map((set) => set.txn)).size).toBe(told.length);

    const onlyCredentials = await drain(tv, complex.stream_id);
    expect(onlyCredentials.map((set) => set.sub_id)).toEqual([{ format: 'complex', user: { format: 'iss_sub', iss: ISSUER, sub: person.userId } }]);
    // The other app never had this user: its receiver hears nothing of them.
    expect(await drain(bot, theirs.stream_id)).toEqual([]);
  });

  it('by email while the user still has one; the operator’s switch lets another receiver hear of them too', async () => {
    const mine = await createStream(t, tv, { format: 'email' });
    const theirs = await createStream(t, bot);
    const person = await seedUser(t, `switch-${Date.now()}@example.test`);
    await device(tv, person);
    await adminPatch(bot.clientId, { ssf_all_users: true });
    try {
      await fanOut();
      expect((await adminCall('PUT', `${user(person.email)}/password`, { password: 'another long passphrase' })).statusCode).toBe(200);
      await fanOut();
      expect((await drain(tv, mine.stream_id)).map((set) => set.sub_id)).toEqual([{ format: 'email', email: person.email }]);
      expect((await drain(bot, theirs.stream_id)).map((set) => [set.aud, set.sub_id])).toEqual([
        [bot.clientId, { format: 'iss_sub', iss: ISSUER, sub: person.userId }],
      ]);
    } finally {
      await adminPatch(bot.clientId, { ssf_all_users: false });
    }
  });
});

describe('poll delivery (RFC 8936)', () => {
  it('hands out SETs oldest first, maxEvents at a time, again until acknowledged; acknowledged ones are removed', async () => {
    const stream = await createStream(t, tv);
    const user = await seedUser(t);
    const grants = [await device(tv, user), await device(tv, user), await device(tv, user)];
    for (const grant of grants) await signOutOnDevicesPage(user, grant.grantId);
    await fanOut();

    const first = await pollStream(t, tv, stream.stream_id, { maxEvents: 2 });
    expect(first.moreAvailable).toBe(true);
    const firstJtis = Object.keys(first.sets);
    expect(firstJtis).toHaveLength(2);
    const again = await pollStream(t, tv, stream.stream_id, { maxEvents: 2 });
    expect(Object.keys(again.sets)).toEqual(firstJtis);
    // The same jti on every delivery, with the same claims.
    for (const jti of firstJtis) {
      const [one, two] = [await verifySet(jwks, first.sets[jti]!, tv.clientId), await verifySet(jwks, again.sets[jti]!, tv.clientId)];
      expect(two).toEqual(one);
    }
    const sessions = await Promise.all(firstJtis.map(async (jti) => ((await verifySet(jwks, first.sets[jti]!, tv.clientId)) as any).sub_id.session.id));
    expect(sessions).toEqual([grants[0]!.grantId, grants[1]!.grantId]);

    const rest = await pollStream(t, tv, stream.stream_id, { ack: firstJtis, maxEvents: 2 });
    expect(rest.moreAvailable).toBe(false);
    const [lastJti, lastSet] = Object.entries(rest.sets)[0]!;
    expect(((await verifySet(jwks, lastSet, tv.clientId)) as any).sub_id.session.id).toBe(grants[2]!.grantId);

    const reported = await pollStream(t, tv, stream.stream_id, {
      setErrs: { [lastJti]: { err: 'invalid_audience', description: 'not for us' } },
      maxEvents: 0,
    });
    expect(reported).toEqual({ sets: {}, moreAvailable: false });
    expect(await t.deps.db.selectFrom('ssf_sets').select('jti').where('stream_id', '=', stream.stream_id).execute()).toEqual([]);
  });

  it('a poll that finds nothing waits for the next SET and answers as soon as it is made', async () => {
    const stream = await createStream(t, tv);
    const user = await seedUser(t);
    const grant = await device(tv, user);
    await fanOut();
    const started = Date.now();
    const waiting = ssfCall(t, tv.token, 'POST', `/ssf/poll/${stream.stream_id}`, {});
    await new Promise((resolve) => setTimeout(resolve, 300));
    await signOutOnDevicesPage(user, grant.grantId);
    await fanOut();
    const res = await waiting;
    expect(res.statusCode).toBe(200);
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(Object.keys(res.json().sets)).toHaveLength(1);
  });

  it('a paused stream holds its SETs and hands out none until enabled; a disabled one drops them and holds no more', async () => {
    const stream = await createStream(t, tv);
    const user = await seedUser(t);
    const held = await device(tv, user);
    const dropped = await device(tv, user);
    const setStatus = (status: string) => ssfCall(t, tv.token, 'POST', '/ssf/status', { stream_id: stream.stream_id, status });

    await setStatus('paused');
    await signOutOnDevicesPage(user, held.grantId);
    await fanOut();
    expect(await pollStream(t, tv, stream.stream_id)).toEqual({ sets: {}, moreAvailable: false });
    await setStatus('enabled');
    expect((await drain(tv, stream.stream_id)).map((set) => set.sub_id.session.id)).toEqual([held.grantId]);

    await signOutOnDevicesPage(user, dropped.grantId);
    await fanOut();
    await setStatus('disabled');
    const later = await device(tv, user);
    await signOutOnDevicesPage(user, later.grantId);
    await fanOut();
    await setStatus('enabled');
    expect(await drain(tv, stream.stream_id)).toEqual([]);
  });

  it('a push stream has nothing to poll', async () => {
    const stream = await createStream(t, tv, { delivery: { method: 'urn:ietf:rfc:8935', endpoint_url: 'https://receiver.example/events' } });
    const res = await ssfCall(t, tv.token, 'POST', `/ssf/poll/${stream.stream_id}`, { returnImmediately: true });
    expect(res.statusCode).toBe(400);
  });
});
