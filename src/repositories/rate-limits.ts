import { sql } from 'kysely';
import type { Database } from '../db/connect.js';
import { deleteUpTo } from './purge.js';

export interface CounterHits {
  key: string;
  windowStart: Date;
  hits: number;
}

/**
 * Counts hits in the fixed window starting at `windowStart`, in one statement: a counter from
 * an older window starts over. Returns the hits of the current window, this one included.
 */
export async function countRateLimitHits(db: Database, key: string, windowStart: Date, hits = 1): Promise<number> {
  const result = await sql<{ hits: number }>`
    INSERT INTO rate_limit_counters AS c (key, window_start, hits) VALUES (${key}, ${windowStart}, ${hits})
    ON CONFLICT (key) DO UPDATE
      SET hits = CASE WHEN c.window_start = excluded.window_start THEN c.hits + excluded.hits ELSE excluded.hits END,
          window_start = excluded.window_start
    RETURNING hits`.execute(db);
  return result.rows[0]?.hits ?? hits;
}

/**
 * countRateLimitHits for many counters in one statement (the buffered limits' flush). Rows are
 * locked in key order, so two instances flushing overlapping keys at once cannot deadlock.
 * Returns each counter's hits in its current window.
 */
export async function countManyRateLimitHits(db: Database, counters: readonly CounterHits[]): Promise<Map<string, number>> {
  if (counters.length === 0) return new Map();
  const sorted = [...counters].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  const result = await sql<{ key: string; hits: number }>`
    INSERT INTO rate_limit_counters AS c (key, window_start, hits)
    SELECT key, window_start, hits
    FROM unnest(${sorted.map((c) => c.key)}::text[], ${sorted.map((c) => c.windowStart.toISOString())}::timestamptz[],
                ${sorted.map((c) => c.hits)}::integer[]) WITH ORDINALITY AS batch(key, window_start, hits, position)
    ORDER BY position
    ON CONFLICT (key) DO UPDATE
      SET hits = CASE WHEN c.window_start = excluded.window_start THEN c.hits + excluded.hits ELSE excluded.hits END,
          window_start = excluded.window_start
    RETURNING key, hits`.execute(db);
  return new Map(result.rows.map((row) => [row.key, row.hits]));
}

/** Many counters' hits in their current windows, without counting one, in one statement; a counter with no hits is absent. */
export async function readManyRateLimitHits(db: Database, counters: ReadonlyArray<Omit<CounterHits, 'hits'>>): Promise<Map<string, number>> {
  if (counters.length === 0) return new Map();
  const result = await sql<{ key: string; hits: number }>`
    SELECT c.key, c.hits
    FROM rate_limit_counters c
    JOIN unnest(${counters.map((c) => c.key)}::text[], ${counters.map((c) => c.windowStart.toISOString())}::timestamptz[])
      AS wanted(key, window_start) ON c.key = wanted.key AND c.window_start = wanted.window_start`.execute(db);
  return new Map(result.rows.map((row) => [row.key, row.hits]));
}

/** Takes back one hit of the window starting at `windowStart`; a counter that moved on is left alone. */
export async function refundRateLimitHit(db: Database, key: string, windowStart: Date): Promise<void> {
  await db
    .updateTable('rate_limit_counters')
    .set((eb) => ({ hits: eb('hits', '-', 1) }))
    .where('key', '=', key)
    .where('window_start', '=', windowStart)
    .where('hits', '>', 0)
    .execute();
}

export const deleteStaleRateLimitCounters = (db: Database, before: Date, limit: number) =>
  deleteUpTo(db, 'rate_limit_counters', 'key', sql<boolean>`window_start < ${before}`, limit);
