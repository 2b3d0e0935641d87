import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { afterAnnounced, seedClient, seedUser, startTestApp, type TestApp } from '../helpers/app.js';
import { createStream, POLL, pollStream, PUSH, SESSION_REVOKED, seedReceiver, ssfCall, type TestReceiver, VERIFICATION, verifySet } from '../helpers/ssf.js';
import { signIn } from '../helpers/tokens.js';

/**
 * Issue 32 §3: the Shared Signals transmitter's configuration and its stream management API
 * (SSF 1.0 §7 and §8), over HTTP, as receivers with tokens of the client_credentials grant.
 */

let t: TestApp;
let receiver: TestReceiver;
let other: TestReceiver;

const ISSUER = 'http://localhost:3000';

const streamRows = () => t.deps.db.selectFrom('ssf_streams').selectAll().execute();
const streamRow = (id: string) => t.deps.db.selectFrom('ssf_streams').selectAll().where('stream_id', '=', id).executeTakeFirst();
const eventCount = async () =>
  Number(
    (
      await t.deps.db
        .selectFrom('events')
        .select((eb) => eb.fn.countAll<string>().as('n'))
        .executeTakeFirstOrThrow()
    ).n,
  );

beforeAll(async () => {
  t = await startTestApp();
  receiver = await seedReceiver(t, { scopes: ['ssf.manage', 'ssf.read'] });
  other = await seedReceiver(t, { kind: 'bot', name: 'Another Receiver' });
});
afterAll(() => t?.close());

describe('the transmitter configuration (SSF 1.0 §7)', () => {
  it('is served at /.well-known/ssf-configuration with every endpoint, both delivery methods and OAuth as the authorization scheme', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/.well-known/ssf-configuration' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    expect(res.json()).toEqual({
      spec_version: '1_0',
      issuer: ISSUER,
      jwks_uri: `${ISSUER}/.well-known/jwks.json`,
      delivery_methods_supported: [PUSH, POLL],
      configuration_endpoint: `${ISSUER}/ssf/stream`,
      status_endpoint: `${ISSUER}/ssf/status`,
      add_subject_endpoint: `${ISSUER}/ssf/subjects/add`,
      remove_subject_endpoint: `${ISSUER}/ssf/subjects/remove`,
      verification_endpoint: `${ISSUER}/ssf/verify`,
      authorization_schemes: [{ spec_urn: 'urn:ietf:rfc:6749' }],
      default_subjects: 'ALL',
    });
  });
});

describe('creating, reading, updating, replacing and deleting streams (SSF 1.0 §8.1.1)', () => {
  it('a stream without delivery polls, at an endpoint of ours; aud is the receiver, and every supported event is delivered', async () => {
    const stream = await createStream(t, receiver, { description: 'poll me' });
    expect(stream).toMatchObject({
      iss: ISSUER,
      aud: receiver.clientId,
      delivery: { method: POLL, endpoint_url: `${ISSUER}/ssf/poll/${stream.stream_id}` },
      events_delivered: stream.events_supported,
      format: 'iss_sub',
      description: 'poll me',
      min_verification_interval: 30,
    });
    expect(stream.stream_id).toMatch(/^[A-Za-z0-9_-]{16,}$/);
    expect(stream.events_supported).toContain(SESSION_REVOKED);
    expect(stream).not.toHaveProperty('events_requested');
  });

  it('a push stream keeps the receiver endpoint; events_requested is narrowed to what we support; its Authorization header is sealed and never shown', async () => {
    const stream = await createStream(t, receiver, {
      delivery: { method: PUSH, endpoint_url: 'https://receiver.example/caep', authorization_header: 'Bearer receiver-secret-123' },
      events_requested: [SESSION_REVOKED, 'urn:example:not-ours'],
      format: 'complex',
    });
    expect(stream).toMatchObject({
      delivery: { method: PUSH, endpoint_url: 'https://receiver.example/caep' },
      events_requested: [SESSION_REVOKED, 'urn:example:not-ours'],
      events_delivered: [SESSION_REVOKED],
      format: 'complex',
    });
    expect(JSON.stringify(stream)).not.toContain('receiver-secret-123');
    const row = await streamRow(stream.stream_id);
    expect(Buffer.from(row!.authorization_header_sealed!).toString('latin1')).not.toContain('receiver-secret-123');
    const read = await ssfCall(t, receiver.token, 'GET', `/ssf/stream?stream_id=${stream.stream_id}`);
    expect(read.statusCode).toBe(200);
    expect(read.headers['cache-control']).toBe('no-store');
    expect(read.body).not.toContain('receiver-secret-123');
    expect(read.json()).toEqual(stream);
  });

  it('without stream_id, a receiver reads its own streams only', async () => {
    const mine = await createStream(t, other);
    const res = await ssfCall(t, other.token, 'GET', '/ssf/stream');
    expect(res.statusCode).toBe(200);
    expect(res.json().map((s: { stream_id: string }) => s.stream_id)).toEqual([mine.stream_id]);
    for (const stream of res.json()) expect(stream.aud).toBe(other.clientId);
  });

  it('PATCH changes what it names and keeps the rest; PUT replaces, and what it leaves out is gone', async () => {
    const stream = await createStream(t, receiver, { description: 'before', events_requested: [SESSION_REVOKED], format: 'email' });
    const patched = await ssfCall(t, receiver.token, 'PATCH', '/ssf/stream', { stream_id: stream.stream_id, description: 'after' });
    expect(patched.statusCode, patched.body).toBe(200);
    expect(patched.json()).toMatchObject({ description: 'after', events_requested: [SESSION_REVOKED], format: 'email', delivery: { method: POLL } });

    // The receiver may send back what it read (transmitter-supplied values included) with its change.
    const { description: _, ...rest } = patched.json();
    const replaced = await ssfCall(t, receiver.token, 'PUT', '/ssf/stream', {
      ...rest,
      delivery: { method: PUSH, endpoint_url: 'https://receiver.example/events' },
    });
    expect(replaced.statusCode, replaced.body).toBe(200);
    expect(replaced.json()).toMatchObject({ delivery: { method: PUSH, endpoint_url: 'https://receiver.example/events' }, format: 'email' });
    expect(replaced.json()).not.toHaveProperty('description');

    const bare = await ssfCall(t, receiver.token, 'PUT', '/ssf/stream', { stream_id: stream.stream_id });
    expect(bare.json()).toMatchObject({ delivery: { method: POLL, endpoint_url: `${ISSUER}/ssf/poll/${stream.stream_id}` }, format: 'iss_sub' });
    expect(bare.json()).not.toHaveProperty('events_requested');
  });

  it('an update whose transmitter-supplied values are not ours is 400, and changes nothing', async () => {
    const stream = await createStream(t, receiver, { description: 'kept' });
    for (const wrong of [{ iss: 'https://elsewhere.example' }, { aud: other.clientId }, { events_delivered: [SESSION_REVOKED] }]) {
      const res = await ssfCall(t, receiver.token, 'PATCH', '/ssf/stream', { stream_id: stream.stream_id, description: 'changed', ...wrong });
      expect(res.statusCode, JSON.stringify(wrong)).toBe(400);
      expect(res.json().error).toBe('invalid_request');
    }
    expect((await streamRow(stream.stream_id))?.description).toBe('kept');
  });

  it('DELETE removes the stream: 204, then 404', async () => {
    const stream = await createStream(t, receiver);
    const res = await ssfCall(t, receiver.token, 'DELETE', `/ssf/stream?stream_id=${stream.stream_id}`);
    expect(res.statusCode).toBe(204);
    expect(await streamRow(stream.stream_id)).toBeUndefined();
    expect((await ssfCall(t, receiver.token, 'GET', `/ssf/stream?stream_id=${stream.stream_id}`)).statusCode).toBe(404);
    expect((await ssfCall(t, receiver.token, 'DELETE', `/ssf/stream?stream_id=${stream.stream_id}`)).statusCode).toBe(404);
  });

  it("another app's stream is not found, whatever the operation, and stays as it was", async () => {
    const theirs = await createStream(t, other, { description: 'theirs' });
    const id = theirs.stream_id;
    const attempts = [
      ssfCall(t, receiver.token, 'GET', `/ssf/stream?stream_id=${id}`),
      ssfCall(t, receiver.token, 'PATCH', '/ssf/stream', { stream_id: id, description: 'mine now' }),
      ssfCall(t, receiver.token, 'PUT', '/ssf/stream', { stream_id: id }),
      ssfCall(t, receiver.token, 'DELETE', `/ssf/stream?stream_id=${id}`),
      ssfCall(t, receiver.token, 'GET', `/ssf/status?stream_id=${id}`),
      ssfCall(t, receiver.token, 'POST', '/ssf/status', { stream_id: id, status: 'disabled' }),
      ssfCall(t, receiver.token, 'POST', '/ssf/subjects/remove', { stream_id: id, subject: { format: 'opaque', id: '00000000-0000-4000-8000-000000000001' } }),
      ssfCall(t, receiver.token, 'POST', '/ssf/verify', { stream_id: id }),
      ssfCall(t, receiver.token, 'POST', `/ssf/poll/${id}`, { returnImmediately: true }),
    ];
    for (const res of await Promise.all(attempts)) {
      expect(res.statusCode, res.body).toBe(404);
      expect(res.json().error).toBe('not_found');
    }
    expect(await streamRow(id)).toMatchObject({ description: 'theirs', status: 'enabled', verification_requested_at: null });
  });

  it('a receiver may have ten streams; the eleventh is 409 and is not stored', async () => {
    const crowded = await seedReceiver(t, { name: 'Crowded Receiver' });
    for (let i = 0; i < 10; i++) await createStream(t, crowded);
    const res = await ssfCall(t, crowded.token, 'POST', '/ssf/stream', {});
    expect(res.statusCode).toBe(409);
    expect((await streamRows()).filter((row) => row.client_id === crowded.clientId)).toHaveLength(10);
  });

  it('concurrent creations never pass the limit', async () => {
    const racing = await seedReceiver(t, { name: 'Racing Receiver' });
    const answers = await Promise.all(Array.from({ length: 14 }, () => ssfCall(t, racing.token, 'POST', '/ssf/stream', {})));
    expect(answers.filter((res) => res.statusCode === 201)).toHaveLength(10);
    expect(answers.filter((res) => res.statusCode === 409)).toHaveLength(4);
    expect((await streamRows()).filter((row) => row.client_id === racing.clientId)).toHaveLength(10);
  });

  it('every change is in the event log, with the receiver and the stream', async () => {
    const stream = await createStream(t, receiver);
    await ssfCall(t, receiver.token, 'PATCH', '/ssf/stream', { stream_id: stream.stream_id, description: 'logged' });
    await ssfCall(t, receiver.token, 'DELETE', `/ssf/stream?stream_id=${stream.stream_id}`);
    const logged = await t.deps.db
      .selectFrom('events')
      .select(['type', 'client_id', 'data'])
      .where('type', 'like', 'ssf_stream.%')
      .orderBy('event_id')
      .execute();
    const ofStream = logged.filter((event) => (event.data as { stream_id: string }).stream_id === stream.stream_id);
    expect(ofStream.map((event) => event.type)).toEqual(['ssf_stream.created', 'ssf_stream.changed', 'ssf_stream.deleted']);
    for (const event of ofStream) expect(event.client_id).toBe(receiver.clientId);
  });
});

describe('who may call (RFC 6750)', () => {
  it('no token is 401 with bare Bearer and DPoP challenges (RFC 9449 §7.1); a wrong one, or a user’s access token, is invalid_token', async () => {
    const none = await ssfCall(t, null, 'GET', '/ssf/stream');
    expect(none.statusCode).toBe(401);
    expect(none.headers['www-authenticate']).toMatch(/^Bearer realm="device-auth", DPoP realm="device-auth", algs="[^"]+"$/);
    const user = await seedUser(t);
    const tv = await seedClient(t, { kind: 'tv' });
    const usersToken = (await signIn(t, tv, user.userId)).access_token;
    for (const token of ['da_at_not-a-token', usersToken, 'garbage token with spaces']) {
      const res = await ssfCall(t, token, 'GET', '/ssf/stream');
      expect(res.statusCode).toBe(401);
      expect(res.json().error).toBe('invalid_token');
      expect(res.headers['www-authenticate']).toContain('error="invalid_token"');
    }
  });

  it('an ssf.read token reads, and may not change anything: 403 insufficient_scope, nothing stored', async () => {
    const reader = await seedReceiver(t, { scopes: ['ssf.read'], name: 'Read-only Receiver' });
    expect((await ssfCall(t, reader.token, 'GET', '/ssf/stream')).statusCode).toBe(200);
    const before = await streamRows();
    const events = await eventCount();
    for (const [method, url, body] of [
      ['POST', '/ssf/stream', {}],
      ['PATCH', '/ssf/stream', { stream_id: 'x'.repeat(22) }],
      ['PUT', '/ssf/stream', { stream_id: 'x'.repeat(22) }],
      ['DELETE', `/ssf/stream?stream_id=${'x'.repeat(22)}`, undefined],
      ['POST', '/ssf/status', { stream_id: 'x'.repeat(22), status: 'paused' }],
      ['POST', '/ssf/subjects/add', { stream_id: 'x'.repeat(22), subject: { format: 'opaque', id: 'x' } }],
      ['POST', '/ssf/subjects/remove', { stream_id: 'x'.repeat(22), subject: { format: 'opaque', id: 'x' } }],
      ['POST', '/ssf/verify', { stream_id: 'x'.repeat(22) }],
      ['POST', `/ssf/poll/${'x'.repeat(22)}`, { returnImmediately: true }],
    ] as const) {
      const res = await ssfCall(t, reader.token, method, url, body);
      expect(res.statusCode, `${method} ${url}`).toBe(403);
      expect(res.json().error).toBe('insufficient_scope');
      expect(res.headers['www-authenticate']).toBe('Bearer realm="device-auth", error="insufficient_scope", scope="ssf.manage"');
    }
    expect(await streamRows()).toEqual(before);
    expect(await eventCount()).toBe(events);
  });

  it("a disabled app's token stops at once; a revoked one too", async () => {
    const doomed = await seedReceiver(t, { name: 'Doomed Receiver' });
    expect((await ssfCall(t, doomed.token, 'GET', '/ssf/stream')).statusCode).toBe(200);
    await afterAnnounced(t, () => t.deps.db.updateTable('clients').set({ disabled_at: t.clock.now() }).where('client_id', '=', doomed.clientId).execute());
    expect((await ssfCall(t, doomed.token, 'GET', '/ssf/stream')).statusCode).toBe(401);

    const revoked = await seedReceiver(t, { name: 'Revoking Receiver' });
    await t.app.inject({
      method: 'POST',
      url: '/oauth/revoke',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        authorization: `Basic ${Buffer.from(`${revoked.clientId}:${revoked.clientSecret}`).toString('base64')}`,
      },
      payload: `token=${revoked.token}`,
    });
    expect((await ssfCall(t, revoked.token, 'GET', '/ssf/stream')).statusCode).toBe(401);
  });

  it('an expired token is refused', async () => {
    const late = await seedReceiver(t, { name: 'Late Receiver' });
    t.clock.advance(t.config.accessTokenTtl + 1);
    expect((await ssfCall(t, late.token, 'GET', '/ssf/stream')).statusCode).toBe(401);
  });
});

describe('status (SSF 1.0 §8.1.2)', () => {
  it('a new stream is enabled; the receiver pauses it with a reason and reads that back', async () => {
    const fresh = await seedReceiver(t, { name: 'Status Receiver', scopes: ['ssf.manage'] });
    const stream = await createStream(t, fresh);
    const status = await ssfCall(t, fresh.token, 'GET', `/ssf/status?stream_id=${stream.stream_id}`);
    expect(status.json()).toEqual({ stream_id: stream.stream_id, status: 'enabled' });
    const paused = await ssfCall(t, fresh.token, 'POST', '/ssf/status', { stream_id: stream.stream_id, status: 'paused', reason: 'maintenance' });
    expect(paused.statusCode).toBe(200);
    expect(paused.json()).toEqual({ stream_id: stream.stream_id, status: 'paused', reason: 'maintenance' });
    expect((await ssfCall(t, fresh.token, 'GET', `/ssf/status?stream_id=${stream.stream_id}`)).json()).toEqual(paused.json());
    const unknown = await ssfCall(t, fresh.token, 'POST', '/ssf/status', { stream_id: stream.stream_id, status: 'asleep' });
    expect(unknown.statusCode).toBe(400);
  });
});

describe('verification (SSF 1.0 §8.1.4)', () => {
  it('sends a verification SET naming the stream with the receiver’s state, at most once per min_verification_interval', async () => {
    const verifier = await seedReceiver(t, { name: 'Verifying Receiver' });
    const stream = await createStream(t, verifier);
    const res = await ssfCall(t, verifier.token, 'POST', '/ssf/verify', { stream_id: stream.stream_id, state: 'state-1' });
    expect(res.statusCode, res.body).toBe(204);
    const soon = await ssfCall(t, verifier.token, 'POST', '/ssf/verify', { stream_id: stream.stream_id, state: 'state-2' });
    expect(soon.statusCode).toBe(429);
    expect(soon.headers['retry-after']).toBe('30');

    const jwks = (await t.app.inject({ method: 'GET', url: '/.well-known/jwks.json' })).json();
    const polled = await pollStream(t, verifier, stream.stream_id);
    const [jti, set] = Object.entries(polled.sets)[0]!;
    const claims = await verifySet(jwks, set, verifier.clientId);
    expect(claims).toMatchObject({ jti, sub_id: { format: 'opaque', id: stream.stream_id }, events: { [VERIFICATION]: { state: 'state-1' } } });

    t.clock.advance(31);
    expect((await ssfCall(t, verifier.token, 'POST', '/ssf/verify', { stream_id: stream.stream_id })).statusCode).toBe(204);
  });
});
