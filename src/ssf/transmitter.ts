import type { Transaction } from 'kysely';
import type { Database } from '../db/connect.js';
import type { DB } from '../db/schema.js';
import type { DeliverySource } from '../delivery/engine.js';
import { enqueueDeliveries, type NewDelivery } from '../delivery/targets.js';
import { type CommittedEvent, takeCommittedEvents } from '../events/committed-events.js';
import type { Clock } from '../lib/clock.js';
import { randomToken } from '../lib/random.js';
import { insertSets } from '../repositories/ssf-sets.js';
import { hasLiveStreams, listEmailsOfUsers, listExclusionsOfUsers, listStreamsForFanOut, listUsersOfApps } from '../repositories/ssf-streams.js';
import { pushDelivery } from './push.js';
import { setClaims, setEventOf, type SetEvent } from './security-event-tokens.js';
import { subjectIdentifier } from './subjects.js';
import { eventsDelivered, PUSH_DELIVERY, SSF_CONSUMER } from './vocabulary.js';

/** Events per transaction: one page of the fan-out. */
const BATCH = 500;

const unique = (values: Iterable<string>) => [...new Set(values)];

interface Signal {
  event: CommittedEvent;
  userId: string;
  set: SetEvent;
}

/**
 * Fans committed events out into SETs, one per stream that may hear of each (in `trx`, the
 * transaction of the consumer's cursor, so each event is fanned out once). A stream hears of an
 * event if it was created before it, delivers its type, was not told to leave its user out, and
 * its receiver may hear of the user: a grant's end only with the receiver's own app, a user's
 * change only if the user has or had a grant with the receiver's app; the operator's switch
 * (clients.ssf_all_users) lets a receiver hear of everyone. A poll stream's SETs wait in ssf_sets;
 * a push stream's are queued for the delivery engine, in order per grant (else per user), held
 * while the stream is paused. Returns how many SETs were made.
 */
async function fanOutEvents(trx: Transaction<DB>, issuer: string, now: Date, events: readonly CommittedEvent[]): Promise<number> {
  const signals: Signal[] = events.flatMap((event) => {
    const set = event.user_id === null ? null : setEventOf(event);
    return set === null || event.user_id === null ? [] : [{ event, userId: event.user_id, set }];
  });
  if (signals.length === 0) return 0;
  const streams = await listStreamsForFanOut(trx);
  if (streams.length === 0) return 0;

  const userIds = unique(signals.map((signal) => signal.userId));
  const aboutUsers = signals.filter((signal) => signal.set.sessionId === null).map((signal) => signal.userId);
  const narrowApps = unique(streams.filter((stream) => !stream.ssf_all_users).map((stream) => stream.client_id));
  const usersOfApps = new Set((await listUsersOfApps(trx, unique(aboutUsers), narrowApps)).map((row) => `${row.user_id} ${row.client_id}`));
  const excluded = new Set((await listExclusionsOfUsers(trx, userIds)).map((row) => `${row.stream_id} ${row.user_id}`));
  const emails = new Map(
    streams.some((stream) => stream.subject_format === 'email') ? (await listEmailsOfUsers(trx, userIds)).map((row) => [row.user_id, row.email]) : [],
  );

  const polled = [];
  const pushed: NewDelivery[] = [];
  for (const { event, userId, set } of signals) {
    for (const stream of streams) {
      if (stream.created_at.getTime() > event.created_at.getTime()) continue;
      if (!eventsDelivered(stream.events_requested).includes(set.type)) continue;
      if (excluded.has(`${stream.stream_id} ${userId}`)) continue;
      const ownUser = set.sessionId !== null ? event.client_id === stream.client_id : usersOfApps.has(`${userId} ${stream.client_id}`);
      if (!stream.ssf_all_users && !ownUser) continue;
      const jti = randomToken(16);
      const subject = subjectIdentifier(stream.subject_format, issuer, { userId, email: emails.get(userId) ?? null, sessionId: set.sessionId });
      const claims = setClaims({ issuer, jti, audience: stream.client_id, issuedAt: now, eventId: event.event_id, subject, event: set });
      if (stream.delivery_method === PUSH_DELIVERY) pushed.push(pushDelivery(stream.stream_id, jti, event.event_id, event.grant_id ?? userId, claims));
      else polled.push({ jti, stream_id: stream.stream_id, event_id: event.event_id, claims: JSON.stringify(claims), created_at: now });
    }
  }
  await insertSets(trx, polled);
  await enqueueDeliveries(trx, pushed, now);
  return polled.length + pushed.length;
}

/**
 * The consumer 'ssf' of the event log, a source of the delivery engine: at each of the engine's
 * rounds, on every instance, it takes the next committed events (one instance at a time: the
 * cursor's lock) and fans them out; the engine then sends what it queued for push streams. Poll
 * requests waiting for SETs are woken when this instance made some; those of other instances find
 * them at their next look.
 */
export class SsfTransmitter implements DeliverySource {
  readonly name = SSF_CONSUMER;
  #waiting = new Set<() => void>();
  #closed = false;

  constructor(
    private readonly clock: Clock,
    private readonly issuer: string,
  ) {}

  /**
   * One page of committed events, fanned out. Returns the events taken (a full page asks for
   * another). Without a stream nothing is taken, at the cost of one indexed look per round: the
   * cursor waits, and the first stream's creation starts it if it never was.
   */
  async feed(db: Database, now: Date): Promise<number> {
    if (!(await hasLiveStreams(db))) return 0;
    let made = 0;
    const taken = await takeCommittedEvents(db, SSF_CONSUMER, BATCH, async (trx, events) => {
      made = await fanOutEvents(trx, this.issuer, now, events);
    });
    if (made > 0) this.#wake();
    return taken;
  }

  /** Fans out what has committed, page after page: what the engine's rounds do, for a caller that does not run them. */
  async tick(db: Database): Promise<void> {
    for (let page = 0; page < 100; page++) {
      if ((await this.feed(db, this.clock.now())) < BATCH) return;
    }
  }

  /** Resolves when this instance next makes SETs, after `ms`, or at close, whichever comes first. */
  nextFanOut(ms: number): Promise<void> {
    if (this.#closed) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.#waiting.delete(done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.#waiting.add(done);
    });
  }

  #wake(): void {
    for (const done of [...this.#waiting]) done();
  }

  /** Waiting polls answer at once. */
  close(): void {
    this.#closed = true;
    this.#wake();
  }
}
