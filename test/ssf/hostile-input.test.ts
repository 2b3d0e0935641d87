import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { createStream, PUSH, SESSION_REVOKED, seedReceiver, ssfCall, type TestReceiver } from '../helpers/ssf.js';

/**
 * Issue 32 §4: hostile input on every field the Shared Signals endpoints take, and SSRF through a
 * push stream's endpoint_url. Every refusal is a clear 400 naming the field, and nothing is stored.
 */

let t: TestApp;
let receiver: TestReceiver;
let stream: string;

/** What a refused request could have written: streams, their subjects and SETs, and the event log. */
async function stored() {
  const db = t.deps.db;
  return {
    streams: await db.selectFrom('ssf_streams').selectAll().orderBy('stream_id').execute(),
    excluded: await db.selectFrom('ssf_excluded_subjects').selectAll().execute(),
    sets: await db.selectFrom('ssf_sets').select(['jti', 'stream_id']).orderBy('jti').execute(),
    events: await db.selectFrom('events').select('event_id').orderBy('event_id').execute(),
  };
}

beforeAll(async () => {
  t = await startTestApp();
  receiver = await seedReceiver(t);
  stream = (await createStream(t, receiver, { description: 'target' })).stream_id;
});
afterAll(() => t?.close());

const NUL = '\u0000';
const LONE_SURROGATE = '\ud800';
const HUGE = 'x'.repeat(40_000);

/** Every field a request carries, each with the body that puts `value` in it. */
function placements(value: unknown): Array<[field: string, method: 'POST' | 'PATCH' | 'PUT', url: string, body: unknown]> {
  return [
    ['description', 'POST', '/ssf/stream', { description: value }],
    ['events_requested', 'POST', '/ssf/stream', { events_requested: [SESSION_REVOKED, value] }],
    ['format', 'POST', '/ssf/stream', { format: value }],
    ['delivery.method', 'POST', '/ssf/stream', { delivery: { method: value } }],
    ['delivery.endpoint_url', 'POST', '/ssf/stream', { delivery: { method: PUSH, endpoint_url: value } }],
    [
      'delivery.authorization_header',
      'POST',
      '/ssf/stream',
      { delivery: { method: PUSH, endpoint_url: 'https://receiver.example/e', authorization_header: value } },
    ],
    ['stream_id', 'PATCH', '/ssf/stream', { stream_id: value, description: 'changed' }],
    ['description (PATCH)', 'PATCH', '/ssf/stream', { stream_id: stream, description: value }],
    ['description (PUT)', 'PUT', '/ssf/stream', { stream_id: stream, description: value }],
    ['status', 'POST', '/ssf/status', { stream_id: stream, status: value }],
    ['reason', 'POST', '/ssf/status', { stream_id: stream, status: 'paused', reason: value }],
    ['subject.format', 'POST', '/ssf/subjects/remove', { stream_id: stream, subject: { format: value } }],
    ['subject.email', 'POST', '/ssf/subjects/remove', { stream_id: stream, subject: { format: 'email', email: value } }],
    ['subject.iss', 'POST', '/ssf/subjects/add', { stream_id: stream, subject: { format: 'iss_sub', iss: value, sub: 'x' } }],
    ['subject.user.id', 'POST', '/ssf/subjects/remove', { stream_id: stream, subject: { format: 'complex', user: { format: 'opaque', id: value } } }],
    ['state', 'POST', '/ssf/verify', { stream_id: stream, state: value }],
    ['ack', 'POST', `/ssf/poll/${stream}`, { returnImmediately: true, ack: [value] }],
    ['setErrs', 'POST', `/ssf/poll/${stream}`, { returnImmediately: true, setErrs: { x: { err: value } } }],
    ['maxEvents', 'POST', `/ssf/poll/${stream}`, { returnImmediately: true, maxEvents: value }],
  ];
}

describe('hostile input on every field', () => {
  it.each([
    ['a NUL character', `a${NUL}b`],
    ['a lone surrogate', `a${LONE_SURROGATE}b`],
    ['a huge value', HUGE],
    ['an object where text belongs', { nested: { deeper: ['x'] } }],
  ])('%s in any field is a 400 naming the field, and nothing is stored', async (_what, value) => {
    const before = await stored();
    for (const [field, method, url, body] of placements(value)) {
      // maxEvents is a number: text of any kind is refused the same way.
      const res = await ssfCall(t, receiver.token, method, url, body);
      expect(res.statusCode, `${field}: ${res.body}`).toBe(400);
      const answer = res.json();
      expect(answer.error).toBe('invalid_request');
      expect(answer.error_description, field).toContain(field.split(' ')[0]!.split('.')[0]!);
    }
    expect(await stored()).toEqual(before);
  });

  it('a body that is not UTF-8, not JSON, JSON of the wrong type, or over 64 KiB is refused, and nothing is stored', async () => {
    const before = await stored();
    const invalidUtf8 = Buffer.concat([Buffer.from('{"description":"'), Buffer.from([0xc0, 0xaf, 0xff, 0xed, 0xa0, 0x80]), Buffer.from('"}')]);
    for (const [body, status] of [
      [invalidUtf8, 400],
      ['{"description": "unterminated', 400],
      ['[1, 2, 3]', 400],
      ['"just a string"', 400],
      [JSON.stringify({ description: 'y'.repeat(70 * 1024) }), 413],
    ] as const) {
      const res = await ssfCall(t, receiver.token, 'POST', '/ssf/stream', body);
      expect(res.statusCode, res.body).toBe(status);
      expect(res.json().error).toBe('invalid_request');
    }
    const text = await t.app.inject({
      method: 'POST',
      url: '/ssf/stream',
      headers: { authorization: `Bearer ${receiver.token}`, 'content-type': 'text/plain' },
      payload: 'description=hello',
    });
    expect(text.statusCode).toBe(415);
    expect(text.json().error).toBe('invalid_request');
    expect(await stored()).toEqual(before);
  });

  it('a stream_id in the query with a NUL, invalid UTF-8 or a lone surrogate escape is refused before any route', async () => {
    for (const query of ['stream_id=a%00b', 'stream_id=%FF', 'stream_id=%ED%A0%80']) {
      for (const url of [`/ssf/stream?${query}`, `/ssf/status?${query}`]) {
        const res = await ssfCall(t, receiver.token, 'GET', url);
        expect(res.statusCode, url).toBe(400);
        expect(res.json().error).toBe('invalid_request');
      }
    }
  });

  it('a header value with a line break cannot smuggle a header', async () => {
    const before = await stored();
    const res = await ssfCall(t, receiver.token, 'POST', '/ssf/stream', {
      delivery: { method: PUSH, endpoint_url: 'https://receiver.example/e', authorization_header: 'Bearer x\r\nX-Injected: 1' },
    });
    expect(res.statusCode).toBe(400);
    expect(res.json().error_description).toContain('delivery.authorization_header');
    expect(await stored()).toEqual(before);
  });
});

describe('SSRF through endpoint_url', () => {
  const REFUSED = [
    ['a private address', 'https://10.0.0.1/events'],
    ['another private address', 'https://192.168.1.20:8443/events'],
    ['carrier-grade NAT', 'https://100.64.0.1/events'],
    ['loopback', 'https://127.0.0.1/events'],
    ['loopback written in hex', 'https://0x7f.1/events'],
    ['loopback as a number', 'https://2130706433/events'],
    ['IPv6 loopback', 'https://[::1]/events'],
    ['the name localhost', 'https://localhost/events'],
    ['a name under localhost', 'https://receiver.localhost/events'],
    ['link-local (cloud metadata)', 'https://169.254.169.254/latest/meta-data'],
    ['IPv6 link-local', 'https://[fe80::1]/events'],
    ['IPv6 unique-local', 'https://[fd00::1]/events'],
    ['IPv4-mapped loopback', 'https://[::ffff:127.0.0.1]/events'],
    ['IPv4-mapped private', 'https://[::ffff:10.0.0.1]/events'],
    ['NAT64 of a private address', 'https://[64:ff9b::a00:1]/events'],
    ['the unspecified address', 'https://0.0.0.0/events'],
    ['plain http', 'http://receiver.example/events'],
    ['another scheme', 'ftp://receiver.example/events'],
    ['credentials in the URL', 'https://user:pass@receiver.example/events'],
    ['a fragment', 'https://receiver.example/events#part'],
    ['a relative URL', '/events'],
  ] as const;

  it.each(REFUSED)('%s (%s) is refused on create, update and replace, and nothing is stored', async (_what, url) => {
    const before = await stored();
    const delivery = { method: PUSH, endpoint_url: url };
    for (const [method, body] of [
      ['POST', { delivery }],
      ['PATCH', { stream_id: stream, delivery }],
      ['PUT', { stream_id: stream, delivery }],
    ] as const) {
      const res = await ssfCall(t, receiver.token, method, '/ssf/stream', body);
      expect(res.statusCode, `${method}: ${res.body}`).toBe(400);
      expect(res.json().error_description).toContain('delivery.endpoint_url');
    }
    expect(await stored()).toEqual(before);
  });

  it('a public address or name over https is taken; with EVENTS_ALLOW_LOOPBACK, http to loopback too, and still nothing private', async () => {
    for (const url of ['https://203.0.114.9/events', 'https://[2a01:4f8::1]/events', 'https://receiver.example:8443/events?stream=1']) {
      const res = await ssfCall(t, receiver.token, 'POST', '/ssf/stream', { delivery: { method: PUSH, endpoint_url: url } });
      expect(res.statusCode, `${url}: ${res.body}`).toBe(201);
      expect(res.json().delivery.endpoint_url).toBe(url);
      await ssfCall(t, receiver.token, 'DELETE', `/ssf/stream?stream_id=${res.json().stream_id}`);
    }
    const local = await startTestApp({ env: { EVENTS_ALLOW_LOOPBACK: 'true' } });
    try {
      const localReceiver = await seedReceiver(local);
      for (const url of ['http://127.0.0.1:4567/events', 'http://[::1]:4567/events', 'https://127.0.0.1/events']) {
        const res = await ssfCall(local, localReceiver.token, 'POST', '/ssf/stream', { delivery: { method: PUSH, endpoint_url: url } });
        expect(res.statusCode, url).toBe(201);
      }
      for (const url of ['http://10.0.0.1/events', 'https://169.254.169.254/', 'http://receiver.example/events', 'https://[::ffff:192.168.0.1]/']) {
        const res = await ssfCall(local, localReceiver.token, 'POST', '/ssf/stream', { delivery: { method: PUSH, endpoint_url: url } });
        expect(res.statusCode, url).toBe(400);
      }
    } finally {
      await local.close();
    }
  });
});
