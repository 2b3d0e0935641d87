import { sql } from 'kysely';
import type { Database } from '../db/connect.js';
import { deleteUpTo } from './purge.js';

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

/** Hits of the current window, without counting one. */
export async function readRateLimitHits(db: Database, key: string, windowStart: Date): Promise<number> {
  const row = await db
    .selectFrom('rate_limit_counters')
    .select('hits')
    .where('key', '=', key)
    .where('window_start', '=', windowStart)
    .executeTakeFirst();
  return row?.hits ?? 0;
}

export const deleteStaleRateLimitCounters = (db: Database, before: Date, limit: number) =>
  deleteUpTo(db, 'rate_limit_counters', 'key', sql<boolean>`window_start < ${before}`, limit);
