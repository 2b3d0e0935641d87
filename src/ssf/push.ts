import { actorColumn } from '../events/event-log.js';
import type { DeliveryKind } from '../delivery/engine.js';
import type { NewDelivery } from '../delivery/targets.js';
import { streamHeaderIdentity } from '../keys/key-encryption.js';
import type { Sealer } from '../keys/sealing.js';
import type { KeyRing } from '../keys/signing-keys.js';
import type { Clock } from '../lib/clock.js';
import { findStreamForPush } from '../repositories/ssf-streams.js';
import { signSet } from './security-event-tokens.js';

/** The delivery engine's name for a push stream (outbound_deliveries.target_kind). */
export const SSF_PUSH_KIND = 'ssf_push';

/**
 * A push stream's SET as the engine's message: its claims as the payload, its jti as the message
 * id (the same on every attempt), in order with the other SETs of its grant, else of its user.
 */
export function pushDelivery(streamId: string, jti: string, eventId: string | null, orderingKey: string | null, claims: Record<string, unknown>): NewDelivery {
  return { target_kind: SSF_PUSH_KIND, target_id: streamId, event_id: eventId, payload: claims, ordering_key: orderingKey, message_id: jti };
}

/**
 * RFC 8935 push, rendered at each attempt: the SET signed now with the key that signs now, POSTed
 * as application/secevent+jwt to the stream's endpoint, with the Authorization header the
 * receiver asked for (opened from its seal). Null while the stream is not enabled, or gone: the
 * engine keeps the message and looks again later (a deleted stream's messages are forgotten with it).
 */
export function ssfPushKind(deps: { keys: Pick<KeyRing, 'signingKey'>; clock: Clock; sealer: Sealer }): DeliveryKind {
  return {
    kind: SSF_PUSH_KIND,
    pausedForFailingEvent(streamId, failingSince, now) {
      return {
        type: 'ssf_stream.changed',
        created_at: now,
        reason: 'paused_failing',
        data: JSON.stringify({ stream_id: streamId, status: 'paused', failing_since: failingSince.toISOString() }),
        actor: actorColumn({ kind: 'server' }),
      };
    },
    async render(db, delivery) {
      const stream = await findStreamForPush(db, delivery.target_id);
      if (stream?.status !== 'enabled' || stream.endpoint_url === null) return null;
      if (delivery.payload === null || typeof delivery.payload !== 'object') return null;
      const claims = delivery.payload as Record<string, unknown>;
      const set = await signSet(deps.keys, deps.clock.now(), claims);
      const authorization =
        stream.authorization_header_sealed === null
          ? null
          : deps.sealer.open(stream.authorization_header_sealed, streamHeaderIdentity(stream.stream_id)).toString('utf8');
      return {
        url: stream.endpoint_url,
        headers: {
          'content-type': 'application/secevent+jwt',
          accept: 'application/json',
          ...(authorization !== null && { authorization }),
        },
        body: set,
      };
    },
  };
}
