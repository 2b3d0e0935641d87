import { sql } from 'kysely';

/**
 * Put in a statement's FROM list (`FROM t, (SELECT ... ${asynchronousCommit} AS async_commit) x`)
 * to make that statement's own transaction commit asynchronously: PostgreSQL reports the commit
 * before its WAL reaches the disk, and the WAL writer flushes it within wal_writer_delay (200 ms
 * by default). A crash in that window loses the transaction as if it had never run; it never
 * leaves the database inconsistent (PostgreSQL manual, "Asynchronous Commit"). Other sessions see
 * the change at once, as with any commit.
 *
 * Only for bookkeeping whose loss nobody would notice, in a statement that is its own transaction:
 * `set_config(..., true)` lasts until the end of the transaction, so inside an explicit one it
 * would make every write of that transaction asynchronous too. Callers refuse a transaction.
 *
 * Why: waiting for the WAL flush is most of a single-row write's cost. On the benchmark's poll,
 * PostgreSQL's CPU per poll went from about 0.19 to 0.135 ms without it (docs/benchmarks.md).
 */
export const asynchronousCommit = sql<string>`set_config('synchronous_commit', 'off', true)`;
