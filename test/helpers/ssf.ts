import { createLocalJWKSet, jwtVerify, type JWTPayload } from 'jose';
import { sql } from 'kysely';
import { expect } from 'vitest';
import { basicAuth, FORM, form, seedClient, type TestApp } from './app.js';

/**
 * Issue 32 §3: a Shared Signals receiver as the tests use one: an app registered for the
 * client_credentials grant, and its calls to the transmitter's JSON endpoints.
 */

export const PUSH = 'urn:ietf:rfc:8935';
export const POLL = 'urn:ietf:rfc:8936';
export const SESSION_REVOKED = 'https://schemas.openid.net/secevent/caep/event-type/session-revoked';
export const VERIFICATION = 'https://schemas.openid.net/secevent/ssf/event-type/verification';

export interface TestReceiver {
  clientId: string;
  clientSecret: string;
  token: string;
}

/** An app's own token, as the client_credentials grant gives it. */
export async function appToken(t: TestApp, client: { clientId: string; clientSecret: string }, scope?: string): Promise<string> {
  const res = await t.app.inject({
    method: 'POST',
    url: '/oauth/token',
    headers: { ...FORM, authorization: basicAuth(client.clientId, client.clientSecret) },
    payload: form({ grant_type: 'client_credentials', scope }),
  });
  expect(res.statusCode, res.body).toBe(200);
  return res.json().access_token;
}

/** A confidential app of `kind` registered for client_credentials and allowed `scopes`, with a token of them. */
export async function seedReceiver(
  t: TestApp,
  options: { kind?: 'tv' | 'bot' | 'web'; scopes?: string[]; grantTypes?: string[]; name?: string } = {},
): Promise<TestReceiver> {
  const scopes = options.scopes ?? ['ssf.manage'];
  const created = await seedClient(t, {
    kind: options.kind ?? 'web',
    type: 'confidential',
    name: options.name ?? 'Signals Receiver',
    scopes,
    grantTypes: options.grantTypes ?? ['client_credentials'],
    introspection: false,
  });
  const client = { clientId: created.clientId, clientSecret: created.clientSecret! };
  return { ...client, token: await appToken(t, client, scopes.filter((s) => s.startsWith('ssf.')).join(' ')) };
}

/** A call to a Shared Signals endpoint with the receiver's token; `body` goes as JSON (a string as it is). */
export function ssfCall(t: TestApp, token: string | null, method: 'GET' | 'POST' | 'PATCH' | 'PUT' | 'DELETE', url: string, body?: unknown) {
  return t.app.inject({
    method,
    url,
    headers: { ...(token !== null && { authorization: `Bearer ${token}` }), ...(body !== undefined && { 'content-type': 'application/json' }) },
    ...(body !== undefined && { payload: typeof body === 'string' || Buffer.isBuffer(body) ? body : JSON.stringify(body) }),
  });
}

/** Creates a stream; its configuration. */
export async function createStream(t: TestApp, receiver: TestReceiver, body: Record<string, unknown> = {}) {
  const res = await ssfCall(t, receiver.token, 'POST', '/ssf/stream', body);
  expect(res.statusCode, res.body).toBe(201);
  return res.json() as { stream_id: string; delivery: { method: string; endpoint_url: string }; [key: string]: unknown };
}

/**
 * Verifies a SET as a receiver would (RFC 8417, SSF 1.0 §4.1) against the transmitter's JWKS as
 * it publishes it: the signature, typ secevent+jwt, iss and aud, and no sub nor exp.
 */
export async function verifySet(jwks: { keys: unknown[] }, set: string, audience: string, issuer = 'http://localhost:3000'): Promise<JWTPayload> {
  const { payload, protectedHeader } = await jwtVerify(set, createLocalJWKSet(jwks as Parameters<typeof createLocalJWKSet>[0]), {
    issuer,
    audience,
    typ: 'secevent+jwt',
    algorithms: ['RS256'],
  });
  expect(protectedHeader.kid).toEqual(expect.any(String));
  expect(payload).not.toHaveProperty('sub');
  expect(payload).not.toHaveProperty('exp');
  return payload;
}

/**
 * Fans out every event committed so far, as each instance's schedule does every 250 ms. The
 * consumer takes only events of transactions older than every one still running anywhere on the
 * database server (events/committed-events.ts), and other tests' transactions run there too: so
 * it looks again, for at most 10 s, until no committed event is left behind its cursor.
 */
export async function fanOutCommitted(t: TestApp): Promise<void> {
  const started = Date.now();
  for (let look = 0; look < 1000; look++) {
    await t.deps.sharedSignals.tick(t.deps.db);
    // Without a live stream the fan-out takes nothing, and nothing is left to wait for.
    const left = await sql<{ n: number }>`
      SELECT count(*)::int AS n FROM events e JOIN event_cursors c ON c.consumer = 'ssf'
      WHERE (e.transaction_id, e.event_id) > (c.transaction_id, c.event_id)
        AND EXISTS (SELECT 1 FROM ssf_streams WHERE status <> 'disabled')`.execute(t.deps.db);
    if (left.rows[0]?.n === 0) return;
    if (Date.now() - started > 10_000) throw new Error('committed events were not fanned out within 10 s');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** Polls a stream (RFC 8936) with returnImmediately unless the request says otherwise. */
export async function pollStream(t: TestApp, receiver: TestReceiver, streamId: string, request: Record<string, unknown> = {}) {
  const res = await ssfCall(t, receiver.token, 'POST', `/ssf/poll/${streamId}`, { returnImmediately: true, ...request });
  expect(res.statusCode, res.body).toBe(200);
  return res.json() as { sets: Record<string, string>; moreAvailable: boolean };
}
