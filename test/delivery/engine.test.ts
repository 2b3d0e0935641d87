import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type DeliveryKind, OutboundDeliveries } from '../../src/delivery/engine.js';
import { maxAttempts, retryDelaySeconds } from '../../src/delivery/schedule.js';
import { enqueueDeliveries, forgetTarget, pauseTarget, resumeTarget, targetState } from '../../src/delivery/targets.js';
import { purgeExpired } from '../../src/housekeeping/purge.js';
import { claimDeliveries, listTargetAttempts } from '../../src/repositories/outbound-deliveries.js';
import { resolveLiteralsOnly, startTestApp, type TestApp } from '../helpers/app.js';
import { type Receiver, startReceiver } from '../helpers/receiver.js';

/**
 * The outbound delivery engine (src/delivery/) with a kind of the test's own: its payload names
 * the receiver's URL and a number, which the receiver sees in the body. The engine is stepped by
 * hand (drain) under the test's clock, or started as the server starts it.
 */
const testKind: DeliveryKind = {
  kind: 'test',
  async render(_db, delivery) {
    const payload = delivery.payload as { url: string; n: number };
    return { url: payload.url, headers: { 'content-type': 'application/json', 'x-message-id': delivery.message_id }, body: JSON.stringify(payload) };
  },
  pausedForFailingEvent: (targetId, failingSince, now) => ({
    type: 'webhook.changed',
    created_at: now,
    reason: 'paused_failing',
    data: JSON.stringify({ test_target: targetId, failing_since: failingSince.toISOString() }),
  }),
};

let t: TestApp;
let receiver: Receiver;
beforeAll(async () => {
  t = await startTestApp({ env: { EVENTS_ALLOW_LOOPBACK: 'true', EVENTS_RETRY_BASE_SECONDS: '5', EVENTS_PAUSE_AFTER_HOURS: '12' } });
  t.deps.deliveries.register(testKind);
});
afterAll(async () => {
  await t?.close();
});
afterEach(async () => {
  await receiver?.close();
});

let targets = 0;
/** A target of its own per test, with a receiver of its own. */
async function newTarget() {
  receiver = await startReceiver();
  return `target-${++targets}-${randomUUID().slice(0, 8)}`;
}

async function queue(target: string, numbers: number[], options: { key?: string | null; url?: string } = {}) {
  const url = options.url ?? receiver.url();
  await enqueueDeliveries(
    t.deps.db,
    numbers.map((n) => ({
      target_kind: 'test',
      target_id: target,
      event_id: null,
      payload: { url, n },
      ordering_key: options.key === undefined ? 'grant-1' : options.key,
      message_id: `msg_${target}_${n}`,
    })),
    t.clock.now(),
  );
}

const numbersReceived = (r: Receiver = receiver) => r.received.map((d) => (JSON.parse(d.body) as { n: number }).n);
const range = (from: number, count: number) => Array.from({ length: count }, (_, i) => from + i);

describe('the outbound delivery engine', () => {
  it('delivers a queued message once, with its message id, and logs the attempt with its status', async () => {
    const target = await newTarget();
    await queue(target, [1]);
    await t.deps.deliveries.drain();
    expect(receiver.received).toHaveLength(1);
    expect(receiver.received[0]?.headers['x-message-id']).toBe(`msg_${target}_1`);
    const log = await listTargetAttempts(t.deps.db, 'test', target, { limit: 10 });
    expect(log.map((a) => [a.message_id, a.http_status, a.error])).toEqual([[`msg_${target}_1`, 200, null]]);
    expect(log[0]?.delivered_at).not.toBeNull();
    await t.deps.deliveries.drain();
    expect(receiver.received).toHaveLength(1);
  });

  it('retries a failure with exponential backoff from EVENTS_RETRY_BASE_SECONDS, with the same message id, never before it is due', async () => {
    const target = await newTarget();
    receiver.answer = (_request, index) => (index < 3 ? 500 : 200);
    await queue(target, [1]);
    await t.deps.deliveries.drain();
    expect(receiver.received).toHaveLength(1);
    for (const [failures, expected] of [
      [1, 2],
      [2, 3],
      [3, 4],
    ] as const) {
      // One second short of the delay: nothing is sent.
      t.clock.advance(retryDelaySeconds(5, failures) - 1);
      await t.deps.deliveries.drain();
      expect(receiver.received).toHaveLength(expected - 1);
      t.clock.advance(1);
      await t.deps.deliveries.drain();
      expect(receiver.received).toHaveLength(expected);
    }
    expect(new Set(receiver.received.map((r) => r.headers['x-message-id']))).toEqual(new Set([`msg_${target}_1`]));
    const log = await listTargetAttempts(t.deps.db, 'test', target, { limit: 10 });
    expect(log.map((a) => a.http_status)).toEqual([500, 500, 500, 200]);
    expect((await targetState(t.deps.db, 'test', target)).failingSince).toBeNull();
  });

  it('failures of several chains of one target at once are all recorded and retried, none left claimed', async () => {
    const target = await newTarget();
    receiver.answer = (_request, index) => (index < 4 ? 500 : 200);
    // Four keys: four chains of the target in flight together, all failing at once.
    for (const key of ['a', 'b', 'c', 'd']) await queue(target, [key.charCodeAt(0)], { key: `grant-${key}` });
    await t.deps.deliveries.drain();
    expect(receiver.received).toHaveLength(4);
    const rows = await t.deps.db.selectFrom('outbound_deliveries').select(['attempts', 'claimed_until']).where('target_id', '=', target).execute();
    expect(rows).toEqual(Array(4).fill({ attempts: 1, claimed_until: null }));
    for (let round = 0; round < 10 && receiver.received.length < 8; round++) {
      t.clock.advance(3600);
      await t.deps.deliveries.drain();
    }
    expect(
      numbersReceived()
        .slice(4)
        .sort((x, y) => x - y),
    ).toEqual([97, 98, 99, 100]);
  });

  it('keeps the order of one ordering key through failures; other keys are not held back by it', async () => {
    const target = await newTarget();
    // The 5th message of grant-a fails twice; grant-b's messages go on meanwhile.
    let failuresLeft = 2;
    receiver.answer = (request) => {
      const { n } = JSON.parse(request.body) as { n: number };
      if (n === 5 && failuresLeft > 0) {
        failuresLeft -= 1;
        return 503;
      }
      return 200;
    };
    await queue(target, range(1, 10), { key: 'grant-a' });
    await queue(target, range(101, 5), { key: 'grant-b' });
    for (let round = 0; round < 10 && numbersReceived().filter((n) => n < 100).length < 12; round++) {
      await t.deps.deliveries.drain();
      t.clock.advance(3600);
    }
    const a = numbersReceived().filter((n) => n < 100);
    const b = numbersReceived().filter((n) => n > 100);
    expect(a).toEqual([1, 2, 3, 4, 5, 5, 5, 6, 7, 8, 9, 10]);
    expect(b).toEqual(range(101, 5));
  });

  it('sends at most four messages of one receiver at once, and a receiver that hangs holds back no other receiver', async () => {
    const slowTarget = await newTarget();
    const slow = receiver;
    slow.answer = () => 'hang';
    const fast = await startReceiver();
    const engine = new OutboundDeliveries(t.deps.db, t.clock, t.deps.log, {
      retryBaseSeconds: 5,
      pauseAfterSeconds: 12 * 3600,
      outbound: { resolve: resolveLiteralsOnly, allowLoopback: true, userAgent: 'test', timeoutMs: 30_000 },
    });
    engine.register(testKind);
    try {
      await queue(slowTarget, range(1, 10), { key: null });
      engine.start();
      await slow.waitFor(4);
      await queue('fast-target', [1, 2, 3], { url: fast.url() });
      await fast.waitFor(3, 2000);
      expect(slow.mostOpenAtOnce).toBe(4);
      expect(slow.received).toHaveLength(4);
    } finally {
      await engine.stop();
      await fast.close();
    }
    // Stopping let the hanging requests go without counting them as attempts.
    expect(await listTargetAttempts(t.deps.db, 'test', slowTarget, { limit: 10 })).toEqual([]);
    await forgetTarget(t.deps.db, 'test', slowTarget);
    await forgetTarget(t.deps.db, 'test', 'fast-target');
  });

  it('rounds that find nothing to do come once a second, not every interval, and a poke is answered at once', async () => {
    const engine = new OutboundDeliveries(t.deps.db, t.clock, t.deps.log, {
      retryBaseSeconds: 5,
      pauseAfterSeconds: 12 * 3600,
      outbound: { resolve: resolveLiteralsOnly, allowLoopback: true, userAgent: 'test', timeoutMs: 30_000 },
    });
    let feeds = 0;
    engine.addSource({
      name: 'nothing-new',
      feed: async () => {
        feeds++;
        return 0;
      },
    });
    const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
    try {
      engine.start();
      await sleep(2600);
      // Every 250 ms that would be eleven rounds; idle, the first and one a second after it.
      const idle = feeds;
      expect(idle).toBeGreaterThanOrEqual(2);
      expect(idle).toBeLessThanOrEqual(4);
      engine.poke();
      await sleep(100);
      expect(feeds).toBe(idle + 1);
    } finally {
      await engine.stop();
    }
  });

  it('1,000 messages of one grant, with the receiver down for an hour, arrive in order afterwards', async () => {
    const target = await newTarget();
    let down = true;
    receiver.answer = () => (down ? 503 : 200);
    await queue(target, range(1, 1000));
    // An hour of the test's clock, in steps, with the engine at work at each one.
    for (let minute = 0; minute < 60; minute += 5) {
      await t.deps.deliveries.drain();
      t.clock.advance(300);
    }
    const triedWhileDown = receiver.received.length;
    // One message at a time while it fails: the backlog waits behind it.
    expect(new Set(numbersReceived())).toEqual(new Set([1]));
    down = false;
    t.clock.advance(3600);
    await t.deps.deliveries.drain(200);
    expect(numbersReceived().slice(triedWhileDown)).toEqual(range(1, 1000));
    expect((await targetState(t.deps.db, 'test', target)).paused).toBeNull();
    // A thousand real HTTP deliveries: on a loaded 2-core machine this took over 30 s; bounded all the same.
  }, 120_000);

  it('a receiver failing for hours is paused with its backlog kept, and resuming delivers the backlog in order', async () => {
    const target = await newTarget();
    let down = true;
    receiver.answer = () => (down ? 500 : 200);
    await queue(target, range(1, 20));
    for (let hour = 0; hour < 13 && (await targetState(t.deps.db, 'test', target)).paused === null; hour += 0.25) {
      await t.deps.deliveries.drain();
      t.clock.advance(900);
    }
    const state = await targetState(t.deps.db, 'test', target);
    expect(state.paused?.reason).toBe('failing');
    // Not after a few failures: after twelve hours of them.
    expect(state.paused!.at.getTime() - state.failingSince!.getTime()).toBeGreaterThanOrEqual(12 * 3600 * 1000);
    // Paused: nothing is sent, whatever time passes, and what comes meanwhile is kept too.
    const before = receiver.received.length;
    await queue(target, [21]);
    t.clock.advance(7 * 86400);
    await t.deps.deliveries.drain();
    expect(receiver.received).toHaveLength(before);
    down = false;
    expect(await resumeTarget(t.deps.db, 'test', target, t.clock.now())).toBe(true);
    await t.deps.deliveries.drain();
    expect(numbersReceived().slice(before)).toEqual(range(1, 21));
    expect(await targetState(t.deps.db, 'test', target)).toEqual({ paused: null, failingSince: null });
  });

  it('an operator pause holds messages without an attempt until resumed', async () => {
    const target = await newTarget();
    expect(await pauseTarget(t.deps.db, 'test', target, t.clock.now())).toBe(true);
    expect(await pauseTarget(t.deps.db, 'test', target, t.clock.now())).toBe(false);
    await queue(target, [1, 2]);
    await t.deps.deliveries.drain();
    expect(receiver.received).toHaveLength(0);
    expect((await targetState(t.deps.db, 'test', target)).paused?.reason).toBe('operator');
    await resumeTarget(t.deps.db, 'test', target, t.clock.now());
    await t.deps.deliveries.drain();
    expect(numbersReceived()).toEqual([1, 2]);
  });

  it('gives a message up after 72 hours of its schedule, and the next of its key goes on', async () => {
    const target = await newTarget();
    // One message the receiver always refuses; the others succeed, so the receiver is not failing as a whole.
    receiver.answer = (request) => ((JSON.parse(request.body) as { n: number }).n === 1 ? 400 : 200);
    await queue(target, [1, 2], { key: 'stubborn' });
    const attempts = maxAttempts(5);
    for (let round = 0; round < attempts + 5; round++) {
      await queue(target, [1000 + round], { key: null });
      await t.deps.deliveries.drain();
      t.clock.advance(3600);
    }
    const ones = numbersReceived().filter((n) => n === 1);
    expect(ones).toHaveLength(attempts);
    expect(numbersReceived()).toContain(2);
    const log = await listTargetAttempts(t.deps.db, 'test', target, { limit: 1000 });
    const first = log.filter((a) => a.message_id === `msg_${target}_1`);
    expect(first.at(-1)?.gave_up_at).not.toBeNull();
    const span = first.at(-1)!.attempted_at.getTime() - first[0]!.attempted_at.getTime();
    expect(span).toBeGreaterThanOrEqual(72 * 3600 * 1000);
  });

  it('a claim its instance never finished expires, and the message is sent by another', async () => {
    const target = await newTarget();
    await queue(target, [1]);
    // An instance claims it and dies.
    const now = t.clock.now();
    const claimed = await claimDeliveries(t.deps.db, now, new Date(now.getTime() + 60_000), { perTarget: 4, chainLength: 20, chains: 10 });
    expect(claimed.map((d) => d.message_id)).toContain(`msg_${target}_1`);
    await t.deps.deliveries.drain();
    expect(receiver.received).toHaveLength(0);
    t.clock.advance(61);
    await t.deps.deliveries.drain();
    expect(numbersReceived()).toEqual([1]);
  });

  it('two instances on one database deliver each message once', async () => {
    const target = await newTarget();
    const second = await startTestApp({ database: t.database, env: { EVENTS_ALLOW_LOOPBACK: 'true' } });
    // Instances share the time: a claim is judged by the claimer's clock and the others'.
    second.clock.advance((t.clock.now().getTime() - second.clock.now().getTime()) / 1000);
    second.deps.deliveries.register(testKind);
    try {
      await queue(target, range(1, 100), { key: null });
      await queue(target, range(101, 100), { key: 'grant-x' });
      t.deps.deliveries.start();
      second.deps.deliveries.start();
      await receiver.waitFor(200, 20_000);
      // A moment more, in which a second copy of anything would arrive.
      await new Promise((resolve) => setTimeout(resolve, 500));
    } finally {
      await t.deps.deliveries.stop();
      await second.close();
    }
    const seen = numbersReceived();
    expect(seen).toHaveLength(200);
    expect(new Set(seen).size).toBe(200);
    expect(seen.filter((n) => n > 100)).toEqual(range(101, 100));
  });

  it('the purge deletes delivered and given-up messages past the retention with their attempts, never one still pending or held', async () => {
    const target = await newTarget();
    await queue(target, [1, 2]);
    await t.deps.deliveries.drain();
    receiver.answer = () => 500;
    await queue(target, [3]);
    await t.deps.deliveries.drain();
    const held = `${target}-held`;
    await pauseTarget(t.deps.db, 'test', held, t.clock.now());
    await queue(held, [4]);
    t.clock.advance(t.config.purge.deliveryRetentionSeconds + 1);
    const purged = await purgeExpired(t.deps.db, t.clock.now(), t.config.purge);
    expect(purged.deliveries).toBeGreaterThanOrEqual(2);
    const left = await t.deps.db
      .selectFrom('outbound_deliveries')
      .select('message_id')
      .where('target_id', 'in', [target, held])
      .orderBy('delivery_id')
      .execute();
    expect(left.map((row) => row.message_id)).toEqual([`msg_${target}_3`, `msg_${held}_4`]);
    expect((await listTargetAttempts(t.deps.db, 'test', target, { limit: 10 })).map((a) => a.http_status)).toEqual([500]);
  });
});
