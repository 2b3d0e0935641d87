import { actorColumn } from '../events/event-log.js';
import type { DeliveryKind } from '../delivery/engine.js';
import { enqueueDeliveries, type NewDelivery } from '../delivery/targets.js';
import { streamHeaderIdentity } from '../keys/key-encryption.js';
import type { Sealer } from '../keys/sealing.js';
import type { KeyRing } from '../keys/signing-keys.js';
import type { Clock } from '../lib/clock.js';
import { randomToken } from '../lib/random.js';
import { findStreamForPush } from '../repositories/ssf-streams.js';
import { setClaims, signSet } from './security-event-tokens.js';
import { streamSubject } from './subjects.js';
import { SET_EVENT_TYPES } from './vocabulary.js';

/** The delivery engine's name for a push stream (outbound_deliveries.target_kind). */
export const SSF_PUSH_KIND = 'ssf_push';

/**
 * A push stream's SET as the engine's message: its claims as the payload, its jti as the message
 * id (the same on every attempt), in order with the other SETs of its grant, else of its user.
 */
export function pushDelivery(streamId: string, jti: string, eventId: string | null, orderingKey: string | null, claims: Record<string, unknown>): NewDelivery {
  return { target_kind: SSF_PUSH_KIND, target_id: streamId, event_id: eventId, payload: claims, ordering_key: orderingKey, message_id: jti };
}

/** Why a push stream is paused when the delivery engine paused it: its status endpoint and its stream-updated SET say this. */
export function pausedForFailingReason(pausedAt: Date): string {
  return `the endpoint kept failing; deliveries paused at ${pausedAt.toISOString()} and held: enable the stream to resume`;
}

/**
 * RFC 8935 push, rendered at each attempt: the SET signed now with the key that signs now, POSTed
 * as application/secevent+jwt to the stream's endpoint, with the Authorization header the
 * receiver asked for (opened from its seal). Null while the stream is not enabled, or gone: the
 * engine keeps the message and looks again later (a deleted stream's messages are forgotten with it).
 */
export function ssfPushKind(deps: { issuer: string; keys: Pick<KeyRing, 'signingKey'>; clock: Clock; sealer: Sealer }): DeliveryKind {
  return {
    kind: SSF_PUSH_KIND,
    /**
     * SSF 1.0 §8.1.5: the stream went from enabled to paused by our doing, so its receiver gets a
     * stream-updated SET. It is queued behind the pause, so held: a receiver whose endpoint keeps
     * failing cannot take it now, and has it (with the rest it missed) once it enables the stream.
     */
    async afterPausedForFailing(db, streamId, _failingSince, now) {
      const stream = await findStreamForPush(db, streamId);
      if (stream?.status !== 'enabled') return;
      const jti = randomToken(16);
      const claims = setClaims({
        issuer: deps.issuer,
        jti,
        audience: stream.client_id,
        issuedAt: now,
        eventId: null,
        // No user: the status changed for every subject of the stream.
        subject: streamSubject(streamId),
        event: { type: SET_EVENT_TYPES.streamUpdated, claims: { status: 'paused', reason: pausedForFailingReason(now) } },
      });
      await enqueueDeliveries(db, [pushDelivery(streamId, jti, null, null, claims)], now);
    },
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
