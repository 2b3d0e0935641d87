import { randomBytes } from 'node:crypto';
import type { Deps } from '../deps.js';
import { enqueueDeliveries, forgetTarget, pauseTarget, resumeTarget } from '../delivery/targets.js';
import { startConsumer } from '../events/committed-events.js';
import { type Actor, actorColumn, recordEvents } from '../events/event-log.js';
import { webhookSecretIdentity } from '../keys/key-encryption.js';
import { receiverUrlProblem } from '../lib/outbound-post.js';
import { randomToken } from '../lib/random.js';
import { findMessageIds, listTargetAttempts } from '../repositories/outbound-deliveries.js';
import { deleteWebhook, hasWebhooks, insertWebhook, listEventsSince, listWebhooks, webhookExists } from '../repositories/webhooks.js';
import { CONSUMER, newMessageId, orderingKeyOf, takesType, WEBHOOK_KIND } from './delivery.js';

/**
 * Webhook endpoints (issue 32 §2): registered, listed, paused, resumed, removed and replayed by
 * an operator through the admin API. Every change writes its event (webhook.created, .changed,
 * .deleted) in its own transaction, with who made it; no event and no listing shows the secret.
 */

export type WebhookDeps = Pick<Deps, 'db' | 'clock' | 'sealer' | 'config'>;

export const WEBHOOK_ID_SYNTAX = /^wh_[A-Za-z0-9_-]{16}$/;
/** Events one replay queues at most: a longer stretch is replayed in several calls, each from where the last ended. */
const REPLAY_LIMIT = 10_000;

export interface WebhookView {
  id: string;
  url: string;
  /** Null: every type. */
  events: string[] | null;
  status: 'active' | 'paused';
  /** Why it is paused: by the operator, or because it kept failing (EVENTS_PAUSE_AFTER_HOURS). */
  paused_reason: 'operator' | 'failing' | null;
  paused_at: string | null;
  /** When its current run of failed attempts began; null when its last attempt succeeded. */
  failing_since: string | null;
  /** Messages waiting for it (held while paused). */
  pending: number;
  created_at: string;
}

type WebhookRow = Awaited<ReturnType<typeof listWebhooks>>[number];

function view(row: WebhookRow): WebhookView {
  return {
    id: row.webhook_id,
    url: row.url,
    events: row.event_types,
    status: row.paused_at ? 'paused' : 'active',
    paused_reason: row.pause_reason ?? null,
    paused_at: row.paused_at?.toISOString() ?? null,
    failing_since: row.failing_since?.toISOString() ?? null,
    pending: row.pending,
    created_at: row.created_at.toISOString(),
  };
}

/** The Standard Webhooks secret form: whsec_ and 32 random bytes in base64. */
const newSecret = () => `whsec_${randomBytes(32).toString('base64')}`;

export type AddOutcome = { ok: true; id: string; secret: string } | { ok: false; field: 'url'; problem: string };

/**
 * Registers an endpoint. The URL is judged here (https, no private address literal; loopback only
 * with EVENTS_ALLOW_LOOPBACK), the types by the admin API's schema (names of the vocabulary). The
 * secret is returned this once and stored sealed.
 */
export async function addWebhook(deps: WebhookDeps, input: { url: string; events?: string[] | undefined }, actor: Actor): Promise<AddOutcome> {
  const problem = receiverUrlProblem(input.url, deps.config.events.allowLoopback);
  if (problem) return { ok: false, field: 'url', problem };
  const id = `wh_${randomToken(12)}`;
  const secret = newSecret();
  const events = input.events === undefined ? null : [...new Set(input.events)];
  const now = deps.clock.now();
  await deps.db.transaction().execute(async (trx) => {
    // Events from here on reach it, even if no instance has taken any yet. The first endpoint
    // moves the cursor to the present: it waited while there was none (the fan-out takes nothing
    // then), and what happened before any endpoint existed is no one's to receive.
    await startConsumer(trx, CONSUMER, { restart: !(await hasWebhooks(trx)) });
    await insertWebhook(trx, {
      webhook_id: id,
      url: input.url,
      event_types: events,
      sealed_secret: deps.sealer.seal(Buffer.from(secret, 'utf8'), webhookSecretIdentity(id)),
      created_at: now,
    });
    await recordEvents(trx, [
      { type: 'webhook.created', created_at: now, data: JSON.stringify({ webhook_id: id, url: input.url, events }), actor: actorColumn(actor) },
    ]);
  });
  return { ok: true, id, secret };
}

export async function listWebhookViews(deps: Pick<Deps, 'db'>, page: { after?: string | undefined; limit: number }): Promise<WebhookView[]> {
  return (await listWebhooks(deps.db, { afterId: page.after, limit: page.limit })).map(view);
}

export async function findWebhookView(deps: Pick<Deps, 'db'>, id: string): Promise<WebhookView | null> {
  const [row] = await listWebhooks(deps.db, { webhookId: id, limit: 1 });
  return row ? view(row) : null;
}

/**
 * Pauses or resumes an endpoint, with its event. Pausing keeps everything queued for it and what
 * comes meanwhile; resuming (also of an endpoint paused for failing) sends the backlog in order.
 * Null: no such endpoint. A pause of a paused endpoint (or a resume of an active one) changes
 * nothing and writes no event.
 */
export async function setWebhookPaused(deps: WebhookDeps, id: string, paused: boolean, actor: Actor): Promise<WebhookView | null> {
  const now = deps.clock.now();
  const found = await deps.db.transaction().execute(async (trx) => {
    if (!(await webhookExists(trx, id, true))) return false;
    const changed = paused ? await pauseTarget(trx, WEBHOOK_KIND, id, now) : await resumeTarget(trx, WEBHOOK_KIND, id, now);
    if (changed) {
      await recordEvents(trx, [
        {
          type: 'webhook.changed',
          created_at: now,
          reason: paused ? 'paused' : 'resumed',
          data: JSON.stringify({ webhook_id: id, changed: ['status'] }),
          actor: actorColumn(actor),
        },
      ]);
    }
    return true;
  });
  return found ? findWebhookView(deps, id) : null;
}

/** Removes an endpoint with everything queued for it and its delivery log. False: no such endpoint. */
export async function removeWebhook(deps: WebhookDeps, id: string, actor: Actor): Promise<boolean> {
  const now = deps.clock.now();
  return deps.db.transaction().execute(async (trx) => {
    if (!(await deleteWebhook(trx, id))) return false;
    await forgetTarget(trx, WEBHOOK_KIND, id);
    await recordEvents(trx, [{ type: 'webhook.deleted', created_at: now, data: JSON.stringify({ webhook_id: id }), actor: actorColumn(actor) }]);
    return true;
  });
}

/**
 * Queues again every event of the log from `since` on that the endpoint takes, oldest first
 * (at most REPLAY_LIMIT; `complete` false: replay again from `last_event_at`). An event it was
 * sent before keeps its message id (webhook-id): a receiver that deduplicates by id takes only
 * what it never got, one that does not gets everything again. Null: no such endpoint.
 */
export async function replayWebhook(
  deps: WebhookDeps,
  id: string,
  since: Date,
  actor: Actor,
): Promise<{ queued: number; last_event_at: string | null; complete: boolean } | null> {
  const now = deps.clock.now();
  return deps.db.transaction().execute(async (trx) => {
    const [row] = await listWebhooks(trx, { webhookId: id, limit: 1 });
    if (!row) return null;
    const events = await listEventsSince(trx, since, REPLAY_LIMIT);
    const taken = events.filter((event) => takesType(row.event_types, event.type));
    const sentAs = await findMessageIds(
      trx,
      WEBHOOK_KIND,
      id,
      taken.map((event) => event.event_id),
    );
    await enqueueDeliveries(
      trx,
      taken.map((event) => ({
        target_kind: WEBHOOK_KIND,
        target_id: id,
        event_id: event.event_id,
        ordering_key: orderingKeyOf(event),
        message_id: sentAs.get(event.event_id) ?? newMessageId(),
      })),
      now,
    );
    await recordEvents(trx, [
      {
        type: 'webhook.changed',
        created_at: now,
        reason: 'replayed',
        data: JSON.stringify({ webhook_id: id, since: since.toISOString(), queued: taken.length }),
        actor: actorColumn(actor),
      },
    ]);
    return { queued: taken.length, last_event_at: events.at(-1)?.created_at.toISOString() ?? null, complete: events.length < REPLAY_LIMIT };
  });
}

export interface AttemptView {
  attempt_id: string;
  message_id: string;
  event_id: string | null;
  attempted_at: string;
  http_status: number | null;
  error: string | null;
  duration_ms: number;
  /** The message's state now: delivered, given up after 72 hours of attempts, or still to be retried. */
  message_state: 'delivered' | 'gave_up' | 'pending';
}

/** The endpoint's delivery log, one row per attempt, oldest first. Null: no such endpoint. */
export async function webhookAttempts(deps: Pick<Deps, 'db'>, id: string, page: { after?: string | undefined; limit: number }): Promise<AttemptView[] | null> {
  if (!(await webhookExists(deps.db, id))) return null;
  const rows = await listTargetAttempts(deps.db, WEBHOOK_KIND, id, { afterAttemptId: page.after, limit: page.limit });
  return rows.map((row) => ({
    attempt_id: row.attempt_id,
    message_id: row.message_id,
    event_id: row.event_id,
    attempted_at: row.attempted_at.toISOString(),
    http_status: row.http_status,
    error: row.error,
    duration_ms: row.duration_ms,
    message_state: row.delivered_at ? 'delivered' : row.gave_up_at ? 'gave_up' : 'pending',
  }));
}
