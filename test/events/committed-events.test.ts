import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type CommittedEvent, takeCommittedEvents } from '../../src/events/committed-events.js';
import { recordEvents } from '../../src/events/event-log.js';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { holdLocks } from '../helpers/lock-holder.js';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => {
  await t?.close();
});

/**
 * Takes what the consumer is given, as the delivery of webhooks or Shared Signals would, until it
 * has `expected` events or 10 s passed. The horizon is every transaction running in this
 * database: an instance's own open transaction holds events back for a moment.
 */
async function drain(consumer: string, limit = 10, expected = 0): Promise<CommittedEvent[]> {
  const seen: CommittedEvent[] = [];
  const deadline = Date.now() + 10_000;
  for (let round = 0; round < 400; round++) {
    const n = await takeCommittedEvents(t.deps.db, consumer, limit, async (_trx, events) => {
      seen.push(...events);
    });
    if (n > 0) continue;
    if (seen.length >= expected || Date.now() > deadline) break;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  return seen;
}

const event = (reason: string) => ({ type: 'user.changed' as const, reason, created_at: t.clock.now() });

describe('the consumers of the event log (events/committed-events.ts)', () => {
  it('a new consumer starts at the present, then gets every later event once, in order, in pages', async () => {
    await recordEvents(t.deps.db, [event('before the consumer')]);
    expect(await drain('first-consumer')).toEqual([]);
    await recordEvents(
      t.deps.db,
      Array.from({ length: 25 }, (_, i) => event(`e${i}`)),
    );
    const seen = await drain('first-consumer', 10, 25);
    expect(seen.map((e) => e.reason)).toEqual(Array.from({ length: 25 }, (_, i) => `e${i}`));
    expect(await drain('first-consumer')).toEqual([]);
  });

  it('a round with nothing to take locks and writes nothing: an idle server leaves its database as it was', async () => {
    await drain('idle-consumer');
    const cursorVersion = async () =>
      (await sql<{ version: string }>`SELECT xmin::text || '/' || xmax::text AS version FROM event_cursors WHERE consumer = 'idle-consumer'`.execute(t.deps.db))
        .rows[0]?.version;
    const before = await cursorVersion();
    expect(before).toBeDefined();
    for (let round = 0; round < 5; round++) {
      expect(await takeCommittedEvents(t.deps.db, 'idle-consumer', 10, async () => {})).toBe(0);
    }
    // A row lock would have set the row's xmax; an advance, its xmin.
    expect(await cursorVersion()).toBe(before);
  });

  it('what the consumer wrote and the cursor roll back together: a failed hand-over is handed over again', async () => {
    await drain('failing-consumer');
    await recordEvents(t.deps.db, [event('once more')]);
    // Until the event is visible (see drain), a take hands nothing over and so cannot fail.
    let failure: unknown = null;
    for (let round = 0; round < 400 && failure === null; round++) {
      failure = await takeCommittedEvents(t.deps.db, 'failing-consumer', 10, async () => {
        throw new Error('the receiver table is away');
      }).then(
        () => null,
        (error: unknown) => error,
      );
      if (failure === null) await new Promise((resolve) => setTimeout(resolve, 25));
    }
    expect(String(failure)).toMatch(/away/);
    expect((await drain('failing-consumer', 10, 1)).map((e) => e.reason)).toEqual(['once more']);
  });

  it.skipIf(!process.env.TEST_DATABASE_URL)(
    'an event whose transaction commits after a later-numbered one is not passed over, and is seen only once it committed',
    async () => {
      await drain('late-commit-consumer');
      // A transaction that writes first (the lower event id) and commits last.
      const late = await holdLocks(t.database.url!);
      await late.query(`INSERT INTO events (type, reason, created_at) VALUES ('user.changed', 'written first, committed last', now())`);
      await recordEvents(t.deps.db, [event('written second, committed first')]);
      // While the first transaction runs, nothing after it is handed over (it could still commit).
      expect(await drain('late-commit-consumer')).toEqual([]);
      await late.commitWhenWaiting(0);
      expect((await drain('late-commit-consumer', 10, 2)).map((e) => e.reason).sort()).toEqual([
        'written first, committed last',
        'written second, committed first',
      ]);
    },
  );

  it.skipIf(!process.env.TEST_DATABASE_URL)('a transaction running in another database of the server holds nothing back, though it is older', async () => {
    await drain('horizon-consumer');
    const otherDatabase = new URL(t.database.url!);
    otherDatabase.pathname = '/postgres';
    const elsewhere = await holdLocks(otherDatabase.toString());
    // A transaction id, as a writer there has, older than the event's.
    await elsewhere.query('SELECT pg_current_xact_id()');
    try {
      await recordEvents(t.deps.db, [event('while another database works')]);
      expect((await drain('horizon-consumer', 10, 1)).map((e) => e.reason)).toEqual(['while another database works']);
    } finally {
      await elsewhere.commitWhenWaiting(0);
    }
  });

  it.skipIf(!process.env.TEST_DATABASE_URL)('an event of a transaction that rolled back is never handed over', async () => {
    await drain('rollback-consumer');
    const doomed = await holdLocks(t.database.url!);
    await doomed.query(`INSERT INTO events (type, reason, created_at) VALUES ('user.changed', 'rolled back', now())`);
    await expect(doomed.query('SELECT 1/0')).rejects.toThrow();
    await recordEvents(t.deps.db, [event('committed')]);
    expect((await drain('rollback-consumer', 10, 1)).map((e) => e.reason)).toEqual(['committed']);
  });

  it('two instances taking at once hand each event over once', async () => {
    await drain('racing-consumer');
    await recordEvents(
      t.deps.db,
      Array.from({ length: 40 }, (_, i) => event(`r${i}`)),
    );
    const seen: string[] = [];
    const take = async () => {
      for (let round = 0; round < 40; round++) {
        await takeCommittedEvents(t.deps.db, 'racing-consumer', 3, async (_trx, events) => {
          seen.push(...events.map((e) => e.reason ?? ''));
        });
      }
    };
    await Promise.all([take(), take(), take()]);
    // What another test file's open transaction held back meanwhile (see drain).
    seen.push(...(await drain('racing-consumer', 10, 40 - seen.length)).map((e) => e.reason ?? ''));
    expect(seen.sort()).toEqual(Array.from({ length: 40 }, (_, i) => `r${i}`).sort());
  });
});
