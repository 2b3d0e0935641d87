import type { CommittedEvent } from '../events/committed-events.js';

/**
 * What a webhook receiver is sent for an event (Standard Webhooks' payload structure):
 * `{ "type", "timestamp", "data" }`, `data` holding the event's columns (the subject as user_id,
 * never an email) and its facts. The writers put no secret and no email in an event; names that
 * look like one are dropped here all the same, at any depth, so that a writer's slip is not sent
 * to every receiver.
 */

const NEVER_SENT = /email|secret|password|token|hash|private|sealed/i;
/** Deeper than any event's facts: anything below is dropped rather than walked. */
const MAX_DEPTH = 6;

function withoutSecrets(value: unknown, depth = 0): unknown {
  if (depth > MAX_DEPTH) return null;
  if (Array.isArray(value)) return value.map((item) => withoutSecrets(item, depth + 1));
  if (value === null || typeof value !== 'object') return value;
  return Object.fromEntries(
    Object.entries(value)
      .filter(([key]) => !NEVER_SENT.test(key))
      .map(([key, item]) => [key, withoutSecrets(item, depth + 1)]),
  );
}

export function webhookPayload(event: CommittedEvent): string {
  const facts = event.data !== null && typeof event.data === 'object' && !Array.isArray(event.data) ? (withoutSecrets(event.data) as object) : {};
  return JSON.stringify({
    type: event.type,
    timestamp: event.created_at.toISOString(),
    data: {
      ...facts,
      event_id: event.event_id,
      grant_id: event.grant_id,
      user_id: event.user_id,
      client_id: event.client_id,
      reason: event.reason,
      ...(event.client_ip !== null && { client_ip: event.client_ip }),
      ...(event.actor !== null && event.actor !== undefined && { actor: withoutSecrets(event.actor) }),
    },
  });
}
