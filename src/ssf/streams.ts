import type { Transaction } from 'kysely';
import { z } from 'zod';
import { normaliseEmail } from '../accounts/users.js';
import type { DB, SsfDeliveryMethod, SsfStreamStatus } from '../db/schema.js';
import type { Deps } from '../deps.js';
import { enqueueDeliveries, forgetTarget, pauseTarget, resumeTarget, targetState } from '../delivery/targets.js';
import { startConsumer } from '../events/committed-events.js';
import { recordEvents } from '../events/event-log.js';
import type { EventType } from '../events/vocabulary.js';
import { streamHeaderIdentity } from '../keys/key-encryption.js';
import { receiverUrlProblem } from '../lib/outbound-post.js';
import { randomToken } from '../lib/random.js';
import { endpoints } from '../oauth/metadata.js';
import { storedText } from '../lib/stored-text.js';
import { insertSets, deleteAllSetsOfStream } from '../repositories/ssf-sets.js';
import {
  claimVerification,
  deleteStreamOfApp,
  excludeSubject,
  findStreamOfApp,
  includeSubject,
  insertStreamIfRoom,
  listStreamsOfApp,
  mayHearOfUser,
  type SsfStreamRow,
  updateStreamOfApp,
} from '../repositories/ssf-streams.js';
import { findUserByEmail } from '../repositories/users.js';
import { badRequest, conflict, noSuchStream, tooManyRequests } from './errors.js';
import { pausedForFailingReason, pushDelivery, SSF_PUSH_KIND } from './push.js';
import type { Receiver } from './receivers.js';
import { setClaims } from './security-event-tokens.js';
import { requestedSubject, streamSubject, subjectKey } from './subjects.js';
import {
  DELIVERY_METHODS,
  EVENTS_SUPPORTED,
  eventsDelivered,
  MIN_VERIFICATION_INTERVAL_SECONDS,
  POLL_DELIVERY,
  PUSH_DELIVERY,
  SET_EVENT_TYPES,
  SSF_CONSUMER,
  SSF_PATHS,
  SUBJECT_FORMATS,
} from './vocabulary.js';

/**
 * The stream management API of SSF 1.0 §8.1: a receiver's streams (create, read, update, replace,
 * delete), their status, their subjects and verification. Every function is one request's work
 * for one receiver, which only ever sees its own streams: another app's stream is not found.
 */

type StreamDeps = Pick<Deps, 'db' | 'clock' | 'config' | 'sealer' | 'deliveries'>;

/** More streams than any receiver needs; past it a creation is 409 (SSF 1.0 §8.1.1.1). */
const MAX_STREAMS_PER_APP = 10;

/** Malformed ids are simply not found; only text that cannot be stored is refused as such. */
const streamId = storedText.min(1).max(128);

const delivery = z.object({
  method: z.enum(DELIVERY_METHODS, { message: `must be ${PUSH_DELIVERY} (push) or ${POLL_DELIVERY} (poll)` }),
  endpoint_url: storedText.max(2048).optional(),
  // Sent as a header value: printable ASCII only, so no line break can add a header of its own.
  authorization_header: z
    .string()
    .min(1)
    .max(2048)
    .regex(/^[\x20-\x7e]+$/, 'must be printable ASCII (it is sent as a header value)')
    .optional(),
});

/** SSF 1.0 §8.1.1: what the receiver supplies (format: the subject format of its SETs, see subjects.ts). */
const receiverSupplied = {
  delivery: delivery.optional(),
  events_requested: z.array(storedText.min(1).max(256)).max(64).optional(),
  description: storedText.max(1024).optional(),
  format: z.enum(SUBJECT_FORMATS, { message: `must be one of ${SUBJECT_FORMATS.join(', ')}` }).optional(),
};

/** What the transmitter supplies: a request may repeat it, and then it must be what we said (§8.1.1.3). */
const transmitterSupplied = {
  iss: z.unknown().optional(),
  aud: z.unknown().optional(),
  events_delivered: z.unknown().optional(),
};

export const streamCreation = z.object(receiverSupplied);
/** PUT replaces, PATCH updates: the same body, read differently (replaceStream, updateStream). */
export const streamChange = z.object({ stream_id: streamId, ...receiverSupplied, ...transmitterSupplied });
export const streamReference = z.object({ stream_id: streamId });
export const statusChange = z.object({
  stream_id: streamId,
  status: z.enum(['enabled', 'paused', 'disabled'], { message: 'must be enabled, paused or disabled' }),
  reason: storedText.max(1024).optional(),
});
export const subjectChange = z.object({ stream_id: streamId, subject: requestedSubject, verified: z.boolean().optional() });
export const verificationRequest = z.object({ stream_id: streamId, state: storedText.max(1024).optional() });

type StreamCreation = z.output<typeof streamCreation>;
type StreamChange = z.output<typeof streamChange>;

/**
 * SSF 1.0 §7.1: the transmitter's configuration, at /.well-known/ssf-configuration. Every subject
 * is in a new stream (default_subjects ALL) until the receiver removes it; which subjects a
 * receiver may hear of at all is the operator's decision (docs/shared-signals.md).
 */
export function transmitterConfiguration(issuer: string) {
  return {
    spec_version: '1_0',
    issuer,
    jwks_uri: endpoints(issuer).jwks_uri,
    delivery_methods_supported: [...DELIVERY_METHODS],
    configuration_endpoint: `${issuer}${SSF_PATHS.configuration}`,
    status_endpoint: `${issuer}${SSF_PATHS.status}`,
    add_subject_endpoint: `${issuer}${SSF_PATHS.addSubject}`,
    remove_subject_endpoint: `${issuer}${SSF_PATHS.removeSubject}`,
    verification_endpoint: `${issuer}${SSF_PATHS.verification}`,
    authorization_schemes: [{ spec_urn: 'urn:ietf:rfc:6749' }],
    default_subjects: 'ALL',
  };
}

/** A poll stream's endpoint: ours, one per stream (SSF 1.0 §6.1.2). */
function pollEndpoint(issuer: string, id: string): string {
  return `${issuer}${SSF_PATHS.poll}/${id}`;
}

/**
 * A stream's configuration as SSF 1.0 §8.1.1 shows it. The push Authorization header is never
 * shown again: it is a secret the receiver gave, kept sealed.
 */
export function streamConfiguration(issuer: string, row: SsfStreamRow) {
  return {
    stream_id: row.stream_id,
    iss: issuer,
    aud: row.client_id,
    delivery: {
      method: row.delivery_method,
      endpoint_url: row.delivery_method === PUSH_DELIVERY ? row.endpoint_url : pollEndpoint(issuer, row.stream_id),
    },
    events_supported: [...EVENTS_SUPPORTED],
    ...(row.events_requested !== null && { events_requested: row.events_requested }),
    events_delivered: eventsDelivered(row.events_requested),
    format: row.subject_format,
    ...(row.description !== null && { description: row.description }),
    min_verification_interval: MIN_VERIFICATION_INTERVAL_SECONDS,
  };
}

export type StreamConfiguration = ReturnType<typeof streamConfiguration>;

/** The delivery columns of a requested delivery: absent means poll (SSF 1.0 §8.1.1.1). */
function deliveryColumns(deps: StreamDeps, requested: z.output<typeof delivery> | undefined, id: string) {
  const method: SsfDeliveryMethod = requested?.method ?? POLL_DELIVERY;
  if (method === POLL_DELIVERY) {
    if (requested?.endpoint_url !== undefined && requested.endpoint_url !== pollEndpoint(deps.config.issuer, id)) {
      throw badRequest('delivery.endpoint_url is supplied by the transmitter for poll delivery: leave it out');
    }
    if (requested?.authorization_header !== undefined) throw badRequest('delivery.authorization_header is for push delivery only');
    return { delivery_method: method, endpoint_url: null, authorization_header_sealed: null };
  }
  const url = requested?.endpoint_url;
  if (url === undefined) throw badRequest('delivery.endpoint_url is required for push delivery');
  const problem = receiverUrlProblem(url, deps.config.events.allowLoopback);
  if (problem !== null) throw badRequest(`delivery.endpoint_url ${problem}`);
  const header = requested?.authorization_header;
  return {
    delivery_method: method,
    endpoint_url: new URL(url).href,
    authorization_header_sealed: header === undefined ? null : deps.sealer.seal(Buffer.from(header, 'utf8'), streamHeaderIdentity(id)),
  };
}

/** The receiver-supplied columns of a creation or a replacement (PUT): what it leaves out is deleted (SSF 1.0 §8.1.1.4). */
function receiverColumns(deps: StreamDeps, body: StreamCreation, id: string) {
  return {
    ...deliveryColumns(deps, body.delivery, id),
    events_requested: body.events_requested ?? null,
    description: body.description ?? null,
    subject_format: body.format ?? ('iss_sub' as const),
  };
}

/** The receiver-supplied columns of an update (PATCH): what it leaves out stays (SSF 1.0 §8.1.1.3). */
function changedColumns(deps: StreamDeps, body: StreamCreation, id: string) {
  return {
    ...(body.delivery !== undefined && deliveryColumns(deps, body.delivery, id)),
    ...(body.events_requested !== undefined && { events_requested: body.events_requested }),
    ...(body.description !== undefined && { description: body.description }),
    ...(body.format !== undefined && { subject_format: body.format }),
  };
}

/** SSF 1.0 §8.1.1.3: transmitter-supplied values in an update must be ours; events_delivered as before the update. */
function checkTransmitterSupplied(issuer: string, row: SsfStreamRow, body: StreamChange): void {
  if (body.iss !== undefined && body.iss !== issuer) throw badRequest(`iss must be ${issuer}, as the stream says`);
  const aud = Array.isArray(body.aud) && body.aud.length === 1 ? body.aud[0] : body.aud;
  if (body.aud !== undefined && aud !== row.client_id) throw badRequest(`aud must be ${row.client_id}, as the stream says`);
  if (body.events_delivered !== undefined) {
    const expected = eventsDelivered(row.events_requested);
    const given = body.events_delivered;
    const same = Array.isArray(given) && given.length === expected.length && expected.every((type) => given.includes(type));
    if (!same) throw badRequest('events_delivered must be what the stream delivers before this change');
  }
}

/** The audit trail of a change to a stream, in its transaction. */
function recordStreamEvent(trx: Transaction<DB>, type: EventType, receiver: Receiver, now: Date, data: Record<string, unknown>, userId: string | null = null) {
  return recordEvents(trx, [{ type, client_id: receiver.clientId, user_id: userId, created_at: now, data: JSON.stringify(data) }]);
}

/** SSF 1.0 §8.1.1.1: a new stream, delivering every event from now on. */
export async function createStream(deps: StreamDeps, receiver: Receiver, body: StreamCreation): Promise<StreamConfiguration> {
  const now = deps.clock.now();
  const id = randomToken(16);
  const columns = receiverColumns(deps, body, id);
  return deps.db.transaction().execute(async (trx) => {
    const row = { stream_id: id, client_id: receiver.clientId, ...columns, status_reason: null, created_at: now, updated_at: now };
    if (!(await insertStreamIfRoom(trx, row, MAX_STREAMS_PER_APP))) {
      throw conflict(`this receiver has ${MAX_STREAMS_PER_APP} streams already, the most it may have: update or delete one`);
    }
    await recordStreamEvent(trx, 'ssf_stream.created', receiver, now, { stream_id: id, delivery_method: columns.delivery_method });
    // The fan-out takes nothing while there is no stream: from here on, every event reaches it.
    await startConsumer(trx, SSF_CONSUMER);
    return streamConfiguration(deps.config.issuer, { ...row, status: 'enabled', verification_requested_at: null });
  });
}

/** SSF 1.0 §8.1.1.2: one stream, or (no stream_id) the receiver's every stream. */
export async function readStreams(deps: StreamDeps, receiver: Receiver, id: string | undefined): Promise<StreamConfiguration | StreamConfiguration[]> {
  if (id === undefined) return (await listStreamsOfApp(deps.db, receiver.clientId)).map((row) => streamConfiguration(deps.config.issuer, row));
  const row = await findStreamOfApp(deps.db, receiver.clientId, id);
  if (!row) throw noSuchStream();
  return streamConfiguration(deps.config.issuer, row);
}

async function changeStream(deps: StreamDeps, receiver: Receiver, body: StreamChange, missing: 'unchanged' | 'deleted'): Promise<StreamConfiguration> {
  const now = deps.clock.now();
  return deps.db.transaction().execute(async (trx) => {
    const current = await findStreamOfApp(trx, receiver.clientId, body.stream_id);
    if (!current) throw noSuchStream();
    checkTransmitterSupplied(deps.config.issuer, current, body);
    const columns = missing === 'unchanged' ? changedColumns(deps, body, body.stream_id) : receiverColumns(deps, body, body.stream_id);
    const row = await updateStreamOfApp(trx, receiver.clientId, body.stream_id, { ...columns, updated_at: now });
    if (!row) throw noSuchStream();
    // What was held for the old delivery method is dropped with it: the receiver reads or takes the new one from now on.
    if (row.delivery_method !== current.delivery_method) await forgetHeld(trx, row.stream_id);
    await recordStreamEvent(trx, 'ssf_stream.changed', receiver, now, { stream_id: row.stream_id, change: missing === 'unchanged' ? 'update' : 'replace' });
    return streamConfiguration(deps.config.issuer, row);
  });
}

/** SSF 1.0 §8.1.1.3 (PATCH): what the request names changes, the rest stays. */
export function updateStream(deps: StreamDeps, receiver: Receiver, body: StreamChange): Promise<StreamConfiguration> {
  return changeStream(deps, receiver, body, 'unchanged');
}

/** SSF 1.0 §8.1.1.4 (PUT): the receiver-supplied configuration is replaced; what it leaves out is gone. */
export function replaceStream(deps: StreamDeps, receiver: Receiver, body: StreamChange): Promise<StreamConfiguration> {
  return changeStream(deps, receiver, body, 'deleted');
}

/** Every SET a stream holds, polled or queued for push. */
async function forgetHeld(trx: Transaction<DB>, id: string): Promise<void> {
  await deleteAllSetsOfStream(trx, id);
  await forgetTarget(trx, SSF_PUSH_KIND, id);
}

/** SSF 1.0 §8.1.1.5: the stream, and every SET it still holds. */
export async function deleteStream(deps: StreamDeps, receiver: Receiver, id: string): Promise<void> {
  const now = deps.clock.now();
  await deps.db.transaction().execute(async (trx) => {
    if (!(await deleteStreamOfApp(trx, receiver.clientId, id))) throw noSuchStream();
    await forgetTarget(trx, SSF_PUSH_KIND, id);
    await recordStreamEvent(trx, 'ssf_stream.deleted', receiver, now, { stream_id: id });
  });
}

export interface StreamStatus {
  stream_id: string;
  status: SsfStreamStatus;
  reason?: string;
}

const statusOf = (row: SsfStreamRow): StreamStatus => ({
  stream_id: row.stream_id,
  status: row.status,
  ...(row.status_reason !== null && { reason: row.status_reason }),
});

/**
 * SSF 1.0 §8.1.2.1. A push stream the delivery engine paused because its endpoint kept failing is
 * paused, and says since when; enabling it resumes it.
 */
export async function readStatus(deps: StreamDeps, receiver: Receiver, id: string): Promise<StreamStatus> {
  const row = await findStreamOfApp(deps.db, receiver.clientId, id);
  if (!row) throw noSuchStream();
  if (row.status === 'enabled' && row.delivery_method === PUSH_DELIVERY) {
    const { paused } = await targetState(deps.db, SSF_PUSH_KIND, row.stream_id);
    if (paused?.reason === 'failing') {
      return {
        stream_id: row.stream_id,
        status: 'paused',
        reason: pausedForFailingReason(paused.at),
      };
    }
  }
  return statusOf(row);
}

/**
 * SSF 1.0 §8.1.2.2: enabled delivers; paused holds every SET until enabled again (the delivery
 * engine holds a push stream's); disabled holds none, so the SETs it held are dropped. Enabling a
 * push stream the engine paused for failing resumes it.
 */
export async function setStatus(deps: StreamDeps, receiver: Receiver, body: z.output<typeof statusChange>): Promise<StreamStatus> {
  const now = deps.clock.now();
  return deps.db.transaction().execute(async (trx) => {
    const row = await updateStreamOfApp(trx, receiver.clientId, body.stream_id, { status: body.status, status_reason: body.reason ?? null, updated_at: now });
    if (!row) throw noSuchStream();
    if (body.status === 'disabled') await forgetHeld(trx, row.stream_id);
    else if (body.status === 'paused') await pauseTarget(trx, SSF_PUSH_KIND, row.stream_id, now);
    else await resumeTarget(trx, SSF_PUSH_KIND, row.stream_id, now);
    await recordStreamEvent(trx, 'ssf_stream.changed', receiver, now, { stream_id: row.stream_id, status: body.status });
    return statusOf(row);
  });
}

/**
 * The user a subject names, if the receiver may hear of them at all; null otherwise, and for a
 * subject that names nobody we know. Both are answered like a success (SSF 1.0 §9.1, subject
 * probing): a receiver cannot learn from this endpoint whether someone has an account.
 */
async function subjectUser(deps: StreamDeps, receiver: Receiver, subject: z.output<typeof requestedSubject>): Promise<string | null> {
  const key = subjectKey(subject, deps.config.issuer);
  if (key === null) return null;
  const userId = 'userId' in key ? key.userId : ((await findUserByEmail(deps.db, normaliseEmail(key.email)))?.user_id ?? null);
  if (userId === null) return null;
  return (await mayHearOfUser(deps.db, receiver.clientId, userId)) ? userId : null;
}

/** SSF 1.0 §8.1.3.2 and §8.1.3.3: every subject is in a stream until removed; adding one back undoes a removal. */
export async function changeSubject(deps: StreamDeps, receiver: Receiver, body: z.output<typeof subjectChange>, change: 'add' | 'remove'): Promise<void> {
  const now = deps.clock.now();
  const stream = await findStreamOfApp(deps.db, receiver.clientId, body.stream_id);
  if (!stream) throw noSuchStream();
  const userId = await subjectUser(deps, receiver, body.subject);
  if (userId === null) return;
  await deps.db.transaction().execute(async (trx) => {
    const changed = change === 'add' ? await includeSubject(trx, stream.stream_id, userId) : await excludeSubject(trx, stream.stream_id, userId);
    if (changed) await recordStreamEvent(trx, 'ssf_stream.changed', receiver, now, { stream_id: stream.stream_id, subject: change }, userId);
  });
}

/**
 * SSF 1.0 §8.1.4.2: a verification SET on the stream, with the receiver's state, at most once per
 * min_verification_interval (429 sooner). A disabled stream transmits nothing, so holds none.
 */
export async function requestVerification(deps: StreamDeps, receiver: Receiver, body: z.output<typeof verificationRequest>): Promise<void> {
  const now = deps.clock.now();
  await deps.db.transaction().execute(async (trx) => {
    const stream = await claimVerification(trx, receiver.clientId, body.stream_id, now, MIN_VERIFICATION_INTERVAL_SECONDS);
    if (!stream) {
      if (!(await findStreamOfApp(trx, receiver.clientId, body.stream_id))) throw noSuchStream();
      throw tooManyRequests(`at most one verification every ${MIN_VERIFICATION_INTERVAL_SECONDS} seconds`, MIN_VERIFICATION_INTERVAL_SECONDS);
    }
    if (stream.status === 'disabled') return;
    const jti = randomToken(16);
    const event = { type: SET_EVENT_TYPES.verification, claims: body.state === undefined ? {} : { state: body.state } };
    const claims = setClaims({
      issuer: deps.config.issuer,
      jti,
      audience: receiver.clientId,
      issuedAt: now,
      eventId: null,
      subject: streamSubject(stream.stream_id),
      event,
    });
    if (stream.delivery_method === PUSH_DELIVERY) await enqueueDeliveries(trx, [pushDelivery(stream.stream_id, jti, null, null, claims)], now);
    else await insertSets(trx, [{ jti, stream_id: stream.stream_id, event_id: null, claims: JSON.stringify(claims), created_at: now }]);
  });
  // Sent at the engine's next round rather than its next look for work.
  deps.deliveries.poke();
}
