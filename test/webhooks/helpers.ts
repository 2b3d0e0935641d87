import type { FastifyInstance } from 'fastify';
import { Webhook } from 'standardwebhooks';
import { expect } from 'vitest';
import { buildAdminApp } from '../../src/admin-app.js';
import type { Deps } from '../../src/deps.js';
import { sql } from 'kysely';
import type { ReceivedDelivery } from '../helpers/receiver.js';
import type { TestApp } from '../helpers/app.js';

export const ADMIN_TOKEN = 'an-admin-token-of-at-least-32-characters-0123456789';

export interface AdminApi {
  app: FastifyInstance;
  url: string;
  call(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }>;
  close(): Promise<void>;
}

/** The admin API on a loopback TCP port, with the token: real HTTP, as the CLI and scripts reach it. */
export async function startAdminApi(deps: Deps): Promise<AdminApi> {
  const app = await buildAdminApp(deps, { listener: 'tcp', logger: false });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const url = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
  return {
    app,
    url,
    async call(method, path, body) {
      const res = await fetch(`${url}${path}`, {
        method,
        headers: { authorization: `Bearer ${ADMIN_TOKEN}`, ...(body !== undefined && { 'content-type': 'application/json' }) },
        ...(body !== undefined && { body: (typeof body === 'string' || body instanceof Uint8Array ? body : JSON.stringify(body)) as BodyInit }),
      });
      const text = await res.text();
      return { status: res.status, body: text === '' ? null : JSON.parse(text) };
    },
    close: () => app.close(),
  };
}

export interface WebhookPayload {
  type: string;
  timestamp: string;
  data: Record<string, unknown> & { reason?: string | null; grant_id?: string | null; user_id?: string | null };
}

/**
 * What a receiver using the `standardwebhooks` package makes of a delivery: verified as the
 * package verifies (its own `verify` when the timestamp is within its five minutes of this
 * machine's clock; for a test that moved the server's clock hours ahead, the package's signature
 * for the id, the header's timestamp and the body, which `verify` compares in the same way).
 */
export function verified(delivery: ReceivedDelivery, secret: string): WebhookPayload {
  const headers = {
    'webhook-id': String(delivery.headers['webhook-id']),
    'webhook-timestamp': String(delivery.headers['webhook-timestamp']),
    'webhook-signature': String(delivery.headers['webhook-signature']),
  };
  const webhook = new Webhook(secret);
  const timestamp = Number(headers['webhook-timestamp']);
  if (Math.abs(timestamp - Date.now() / 1000) < 240) return webhook.verify(delivery.body, headers) as WebhookPayload;
  expect(headers['webhook-signature']).toBe(webhook.sign(headers['webhook-id'], new Date(timestamp * 1000), delivery.body));
  return JSON.parse(delivery.body) as WebhookPayload;
}

/** Events committed that the webhooks' fan-out has not taken yet (none while no endpoint is registered: it takes nothing then). */
async function untakenEvents(t: TestApp): Promise<number> {
  const { rows } = await sql<{ n: number }>`
    SELECT count(*)::int AS n FROM events e, event_cursors c
    WHERE c.consumer = 'webhooks' AND (e.transaction_id, e.event_id) > (c.transaction_id, c.event_id)
      AND EXISTS (SELECT 1 FROM webhooks)`.execute(t.deps.db);
  return rows[0]?.n ?? 0;
}

/**
 * The fan-out and every delivery due now, under the test's clock. The fan-out takes an event only
 * once every transaction of this database older than it has ended (events/committed-events.ts):
 * it is waited for, within 10 s.
 */
export async function drainWebhooks(t: TestApp): Promise<void> {
  const started = Date.now();
  for (let round = 0; round < 1000; round++) {
    await t.deps.deliveries.drain(300);
    if ((await untakenEvents(t)) === 0) return;
    if (Date.now() - started > 10_000) throw new Error('the fan-out did not take the committed events within 10 s');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
