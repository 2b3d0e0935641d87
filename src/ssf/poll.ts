import { z } from 'zod';
import type { Deps } from '../deps.js';
import { storedText } from '../lib/stored-text.js';
import { deleteSetsOfStream, hasSets, listSetsOfStream } from '../repositories/ssf-sets.js';
import { findStreamOfApp } from '../repositories/ssf-streams.js';
import { badRequest, noSuchStream } from './errors.js';
import type { Receiver } from './receivers.js';
import { signSet } from './security-event-tokens.js';
import { POLL_DELIVERY } from './vocabulary.js';

/** SETs per answer when the receiver does not say, and at most whatever it says. */
const DEFAULT_MAX_EVENTS = 25;
const MOST_EVENTS = 100;
/** How long a poll without returnImmediately waits for a SET (RFC 8936 §2.4: long polling). */
const LONG_POLL_MS = 10_000;
/** A waiting poll looks again this often: other instances fan out too, and do not wake it. */
const LOOK_AGAIN_MS = 500;
/** Acknowledgements and errors per request. */
const MOST_ACKNOWLEDGED = 1000;

const jti = storedText.min(1).max(128);

/** RFC 8936 §2.4: the poll request. */
export const pollRequest = z.object({
  maxEvents: z.number().int().min(0).max(1_000_000).optional(),
  returnImmediately: z.boolean().optional(),
  ack: z.array(jti).max(MOST_ACKNOWLEDGED).optional(),
  setErrs: z
    .record(jti, z.object({ err: storedText.min(1).max(64), description: storedText.max(1024).optional() }))
    .refine((errors) => Object.keys(errors).length <= MOST_ACKNOWLEDGED, `at most ${MOST_ACKNOWLEDGED} SETs at once`)
    .optional(),
});

export interface PollAnswer {
  sets: Record<string, string>;
  moreAvailable: boolean;
}

type PollDeps = Pick<Deps, 'db' | 'clock' | 'keys' | 'log' | 'sharedSignals'>;

/**
 * RFC 8936: a receiver's poll of its stream. The SETs it acknowledges (ack) or reports as errors
 * (setErrs, logged) are removed first; then up to maxEvents of those still held, oldest first,
 * each signed now with the jti it always has. A SET is handed out at every poll until
 * acknowledged. Without returnImmediately a poll that finds none waits up to 10 s for one. A paused
 * stream holds its SETs and hands out none (SSF 1.0 §8.1.2).
 */
export async function pollSets(
  deps: PollDeps,
  receiver: Receiver,
  streamId: string,
  request: z.output<typeof pollRequest>,
  signal: AbortSignal,
): Promise<PollAnswer> {
  const stream = await findStreamOfApp(deps.db, receiver.clientId, streamId);
  if (!stream) throw noSuchStream();
  if (stream.delivery_method !== POLL_DELIVERY) throw badRequest('this stream delivers by push (RFC 8935): it has no SETs to poll');
  const errors = Object.entries(request.setErrs ?? {});
  await deleteSetsOfStream(deps.db, stream.stream_id, [...(request.ack ?? []), ...errors.map(([id]) => id)]);
  if (errors.length > 0) {
    deps.log.warn(
      { stream_id: stream.stream_id, client_id: receiver.clientId, errors: errors.slice(0, 10).map(([id, e]) => ({ jti: id, err: e.err })) },
      'a receiver refused SETs',
    );
  }
  if (stream.status !== 'enabled') return { sets: {}, moreAvailable: false };
  if (request.maxEvents === 0) return { sets: {}, moreAvailable: await hasSets(deps.db, stream.stream_id) };

  const limit = Math.min(request.maxEvents ?? DEFAULT_MAX_EVENTS, MOST_EVENTS);
  const until = Date.now() + (request.returnImmediately ? 0 : LONG_POLL_MS);
  for (let look = 0; look <= LONG_POLL_MS / 10; look++) {
    const held = await listSetsOfStream(deps.db, stream.stream_id, limit);
    const left = until - Date.now();
    if (held.sets.length > 0 || left <= 0 || signal.aborted) {
      const signed = await Promise.all(held.sets.map(async (set) => [set.jti, await signSet(deps.keys, deps.clock.now(), set.claims)] as const));
      return { sets: Object.fromEntries(signed), moreAvailable: held.more };
    }
    await deps.sharedSignals.nextFanOut(Math.min(left, LOOK_AGAIN_MS));
  }
  return { sets: {}, moreAvailable: false };
}
