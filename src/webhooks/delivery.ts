import { actorColumn } from '../events/event-log.js';
import { Webhook } from 'standardwebhooks';
import type { Deps } from '../deps.js';
import type { DeliveryKind, DeliverySource } from '../delivery/engine.js';
import { enqueueDeliveries, type NewDelivery } from '../delivery/targets.js';
import { takeCommittedEvents } from '../events/committed-events.js';
import { webhookSecretIdentity } from '../keys/key-encryption.js';
import { epochSeconds } from '../lib/clock.js';
import { randomToken } from '../lib/random.js';
import { findEventForDelivery, findWebhookForDelivery, hasWebhooks, listWebhookSubscriptions } from '../repositories/webhooks.js';
import { webhookPayload } from './payload.js';

export const WEBHOOK_KIND = 'webhook';
/** The event log's consumer that fans events out to webhooks (events/committed-events.ts). */
export const CONSUMER = 'webhooks';
/** Events per page of the fan-out: one transaction each. */
const FAN_OUT_PAGE = 500;

/** A message's id (webhook-id): the same on every attempt and replay of it. */
export const newMessageId = () => `msg_${randomToken(18)}`;

/** Rows of one target and key go out in order: a grant's events in order, else a user's. */
export const orderingKeyOf = (event: { grant_id: string | null; user_id: string | null }) => event.grant_id ?? event.user_id ?? null;

export const takesType = (eventTypes: readonly string[] | null, type: string) => eventTypes === null || eventTypes.includes(type);

/**
 * The fan-out: each committed event, once, becomes one delivery per endpoint that takes its type,
 * in the transaction that advances the consumer's cursor. While no endpoint is registered it takes
 * nothing and the cursor waits. A paused endpoint's deliveries are
 * queued held: its backlog is kept. An endpoint may be sent a few events from just before it was
 * registered (those the fan-out had not reached yet).
 */
export function webhookFanOut(): DeliverySource {
  return {
    name: CONSUMER,
    async feed(db, now) {
      // Without an endpoint nothing is taken (a busy server's events would be read for no one);
      // the first endpoint's registration moves the cursor to the present.
      if (!(await hasWebhooks(db))) return 0;
      return takeCommittedEvents(db, CONSUMER, FAN_OUT_PAGE, async (trx, events) => {
        const hooks = await listWebhookSubscriptions(trx);
        if (hooks.length === 0) return;
        const deliveries: NewDelivery[] = [];
        for (const event of events) {
          for (const hook of hooks) {
            if (!takesType(hook.event_types, event.type)) continue;
            deliveries.push({
              target_kind: WEBHOOK_KIND,
              target_id: hook.webhook_id,
              event_id: event.event_id,
              ordering_key: orderingKeyOf(event),
              message_id: newMessageId(),
            });
          }
        }
        await enqueueDeliveries(trx, deliveries, now);
      });
    },
  };
}

/**
 * Renders a webhook delivery as Standard Webhooks says: the payload as the body, `webhook-id`
 * (the message id, the same on every retry), `webhook-timestamp` (this attempt's time, in
 * seconds) and `webhook-signature` (`v1,` and the HMAC-SHA256 of `id.timestamp.body` under the
 * endpoint's secret), signed by the `standardwebhooks` package that receivers verify with.
 */
export function webhookKind(deps: Pick<Deps, 'clock' | 'sealer'>): DeliveryKind {
  return {
    kind: WEBHOOK_KIND,
    pausedForFailingEvent(webhookId, failingSince, now) {
      return {
        type: 'webhook.changed',
        created_at: now,
        reason: 'paused_failing',
        data: JSON.stringify({ webhook_id: webhookId, changed: ['status'], failing_since: failingSince.toISOString() }),
        actor: actorColumn({ kind: 'server' }),
      };
    },
    async render(db, delivery) {
      if (delivery.event_id === null) return null;
      const [hook, event] = await Promise.all([findWebhookForDelivery(db, delivery.target_id), findEventForDelivery(db, delivery.event_id)]);
      // An endpoint being removed takes its deliveries with it; a purged event is gone for good.
      if (!hook) return null;
      if (!event) return { gone: 'event_purged' };
      const body = webhookPayload({ ...event, event_id: delivery.event_id });
      const secret = deps.sealer.open(hook.sealed_secret, webhookSecretIdentity(delivery.target_id)).toString('utf8');
      const now = deps.clock.now();
      return {
        url: hook.url,
        headers: {
          'content-type': 'application/json',
          'webhook-id': delivery.message_id,
          'webhook-timestamp': String(epochSeconds(now)),
          'webhook-signature': new Webhook(secret).sign(delivery.message_id, now, body),
        },
        body,
      };
    },
  };
}
