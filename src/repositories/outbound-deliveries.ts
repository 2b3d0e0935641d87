import { sql, type Transaction } from 'kysely';
import { asynchronousCommit } from '../db/asynchronous-commit.js';
import type { Database } from '../db/connect.js';
import type { DB } from '../db/schema.js';

type Db = Database | Transaction<DB>;

/** A delivery as the engine sends it and a kind renders it. */
export interface ClaimedDelivery {
  delivery_id: string;
  target_kind: string;
  target_id: string;
  event_id: string | null;
  payload: unknown;
  ordering_key: string | null;
  message_id: string;
  attempts: number;
  created_at: Date;
}

export interface NewDelivery {
  target_kind: string;
  target_id: string;
  event_id: string | null;
  /** For a message that is not an event of the log; JSON. */
  payload?: unknown;
  ordering_key: string | null;
  message_id: string;
}

/**
 * Queues messages in one statement: due at once, or held (no next attempt) when their target is
 * paused, so that a paused target keeps its backlog.
 */
export async function insertDeliveries(db: Db, rows: readonly NewDelivery[], now: Date): Promise<void> {
  if (rows.length === 0) return;
  const json = JSON.stringify(rows.map((row, place) => ({ ...row, payload: row.payload ?? null, place })));
  await sql`
    INSERT INTO outbound_deliveries (target_kind, target_id, event_id, payload, ordering_key, message_id, next_attempt_at, created_at)
    SELECT v.target_kind, v.target_id, v.event_id, v.payload, v.ordering_key, v.message_id,
           CASE WHEN EXISTS (
             SELECT 1 FROM delivery_targets t
             WHERE t.target_kind = v.target_kind AND t.target_id = v.target_id AND t.paused_at IS NOT NULL
           ) THEN NULL ELSE ${now}::timestamptz END,
           ${now}::timestamptz
    FROM jsonb_to_recordset(${json}::jsonb)
      AS v(target_kind text, target_id text, event_id bigint, payload jsonb, ordering_key text, message_id text, place int)
    -- Ids in the order given: that order is the order of delivery within a key.
    ORDER BY v.place`.execute(db);
}

/** Any number: one key for the claims of every instance. */
const CLAIM_LOCK = 3_200_032;

export interface ClaimLimits {
  /** Chains of one target claimed at once (across instances); 1 for a target that is failing. */
  perTarget: number;
  /** Rows of one chain claimed together, sent one after the other. */
  chainLength: number;
  /** Chains in all. */
  chains: number;
}

/**
 * Claims due messages until `until`, as chains: the first pending row of a (target, ordering key)
 * when it is due and unclaimed, with the rows after it. A row is never claimed while an earlier
 * row of its chain is pending, so a chain goes out in order, one attempt at a time.
 *
 * One claimer at a time across instances (a transaction-scoped advisory lock; an instance that
 * finds it taken claims nothing this round): with two claimers, one could take a chain's first
 * row and the other, skipping that locked row, its second. The claim itself is one short
 * statement; the sending happens outside any transaction.
 */
export async function claimDeliveries(db: Database, now: Date, until: Date, limits: ClaimLimits): Promise<ClaimedDelivery[]> {
  return db.transaction().execute(async (trx) => {
    const locked = await sql<{ locked: boolean }>`SELECT pg_try_advisory_xact_lock(${CLAIM_LOCK}) AS locked, ${asynchronousCommit} AS async_commit`.execute(
      trx,
    );
    if (!locked.rows[0]?.locked) return [];
    const claimed = await sql<ClaimedDelivery>`
      WITH heads AS (
        SELECT d.delivery_id, d.target_kind, d.target_id, d.ordering_key, d.next_attempt_at, d.attempts
        FROM outbound_deliveries d
        -- A lateral probe rather than NOT EXISTS: it is always a lookup in the chain index with
        -- this row's values, whatever the planner believes of the table's size (on a table it has
        -- no statistics of yet, NOT EXISTS became a scan of every chain for every row).
        LEFT JOIN LATERAL (
          SELECT true AS waits FROM outbound_deliveries e
          WHERE e.target_kind = d.target_kind AND e.target_id = d.target_id AND e.ordering_key = d.ordering_key
            AND e.delivery_id < d.delivery_id AND e.delivered_at IS NULL AND e.gave_up_at IS NULL
          LIMIT 1
        ) earlier ON true
        WHERE d.delivered_at IS NULL AND d.gave_up_at IS NULL
          AND d.next_attempt_at <= ${now}
          AND (d.claimed_until IS NULL OR d.claimed_until <= ${now})
          AND earlier.waits IS NULL
      ),
      busy AS (
        SELECT target_kind, target_id, count(DISTINCT coalesce(ordering_key, '#' || delivery_id::text))::int AS chains
        FROM outbound_deliveries
        WHERE claimed_until > ${now} AND delivered_at IS NULL AND gave_up_at IS NULL
        GROUP BY target_kind, target_id
      ),
      ranked AS (
        -- Within a target, messages never tried come first: a failing target's one probe is then a
        -- fresh message, not the one message the receiver always refuses, which would make it
        -- look dead while everything else it is sent succeeds.
        SELECT h.*, row_number() OVER (PARTITION BY h.target_kind, h.target_id ORDER BY h.attempts, h.next_attempt_at, h.delivery_id) AS place
        FROM heads h
      ),
      chosen AS (
        SELECT r.delivery_id, r.target_kind, r.target_id, r.ordering_key
        FROM ranked r
        LEFT JOIN busy b ON b.target_kind = r.target_kind AND b.target_id = r.target_id
        LEFT JOIN delivery_targets t ON t.target_kind = r.target_kind AND t.target_id = r.target_id
        WHERE r.place + coalesce(b.chains, 0) <= CASE WHEN t.failing_since IS NOT NULL THEN 1 ELSE ${limits.perTarget}::int END
        ORDER BY r.next_attempt_at, r.delivery_id
        LIMIT ${limits.chains}
      ),
      claimable AS (
        SELECT c.delivery_id FROM chosen c
        UNION ALL
        SELECT f.delivery_id FROM chosen c CROSS JOIN LATERAL (
          SELECT e.delivery_id FROM outbound_deliveries e
          WHERE c.ordering_key IS NOT NULL
            AND e.target_kind = c.target_kind AND e.target_id = c.target_id AND e.ordering_key = c.ordering_key
            AND e.delivery_id > c.delivery_id AND e.delivered_at IS NULL AND e.gave_up_at IS NULL
          ORDER BY e.delivery_id
          LIMIT ${limits.chainLength - 1}::int
        ) f
      )
      UPDATE outbound_deliveries d SET claimed_until = ${until}
      FROM claimable c WHERE d.delivery_id = c.delivery_id
      RETURNING d.delivery_id::text AS delivery_id, d.target_kind, d.target_id, d.event_id::text AS event_id, d.payload,
                d.ordering_key, d.message_id, d.attempts, d.created_at`.execute(trx);
    return claimed.rows;
  });
}

export interface AttemptRecord {
  delivery_id: string;
  attempted_at: Date;
  http_status: number | null;
  error: string | null;
  duration_ms: number;
}

/** A failed attempt, and what it means for the row: tried again at `at`, or given up. */
export async function recordFailedAttempt(db: Db, attempt: AttemptRecord, outcome: { kind: 'retry'; at: Date } | { kind: 'gave_up' }): Promise<void> {
  await db.insertInto('delivery_attempts').values(attempt).execute();
  await db
    .updateTable('outbound_deliveries')
    .set((eb) => ({
      attempts: eb('attempts', '+', 1),
      claimed_until: null,
      ...(outcome.kind === 'gave_up' ? { gave_up_at: attempt.attempted_at } : {}),
      ...(outcome.kind === 'retry' ? { next_attempt_at: outcome.at } : {}),
    }))
    .where('delivery_id', '=', attempt.delivery_id)
    .execute();
}

/** Lets claimed rows go without an attempt (the rest of a chain whose head failed, a shutdown); with `at`, not due before it. */
export async function releaseDeliveries(db: Db, deliveryIds: readonly string[], at: Date | null): Promise<void> {
  if (deliveryIds.length === 0) return;
  await db
    .updateTable('outbound_deliveries')
    .set((eb) => ({
      claimed_until: null,
      ...(at
        ? { next_attempt_at: sql<Date>`CASE WHEN ${eb.ref('next_attempt_at')} IS NULL THEN NULL ELSE greatest(${eb.ref('next_attempt_at')}, ${at}) END` }
        : {}),
    }))
    .where('delivery_id', 'in', deliveryIds)
    .execute();
}

/**
 * A delivered message in one statement (the common case, once per message): its attempt, the
 * row, and the target no longer failing (written only when it was).
 *
 * The target's row is locked before the message's, as a failure's transaction locks them
 * (engine.ts): the row's UPDATE reads the target's CTE in its condition, which runs it before any
 * row is locked. In the other order, a success and a failure of two chains of one failing target
 * (the failure postpones every pending row of the target) could each hold what the other waits
 * for.
 *
 * It commits asynchronously (db/asynchronous-commit.ts): a crash that loses the last fraction of
 * a second of these sends those messages again, which at least once allows and the receiver
 * recognises by their message id. Waiting for the flush was most of a delivery's cost.
 */
export async function recordDelivered(db: Database, attempt: AttemptRecord, targetKind: string, targetId: string): Promise<void> {
  if (db.isTransaction) throw new Error('recordDelivered commits asynchronously: it must not run inside a transaction');
  await sql`
    WITH target AS (
      UPDATE delivery_targets SET failing_since = NULL, failures = 0
      WHERE target_kind = ${targetKind} AND target_id = ${targetId} AND failures > 0
      RETURNING 1
    ),
    attempt AS (
      INSERT INTO delivery_attempts (delivery_id, attempted_at, http_status, error, duration_ms)
      SELECT ${attempt.delivery_id}, ${attempt.attempted_at}, ${attempt.http_status}::int, ${attempt.error}::text, ${attempt.duration_ms}
      FROM (SELECT ${asynchronousCommit} AS async_commit) this_statement
    )
    UPDATE outbound_deliveries SET attempts = attempts + 1, claimed_until = NULL, delivered_at = ${attempt.attempted_at}
    WHERE delivery_id = ${attempt.delivery_id} AND (SELECT count(*) FROM target) >= 0`.execute(db);
}

/** A failure: since when the target has been failing, and how many failures in a row, this one included. */
export async function noteTargetFailed(db: Db, targetKind: string, targetId: string, now: Date): Promise<{ failing_since: Date; failures: number }> {
  return db
    .insertInto('delivery_targets')
    .values({ target_kind: targetKind, target_id: targetId, failing_since: now, failures: 1 })
    .onConflict((conflict) =>
      conflict.columns(['target_kind', 'target_id']).doUpdateSet((eb) => ({
        failing_since: sql<Date>`coalesce(${eb.ref('delivery_targets.failing_since')}, excluded.failing_since)`,
        failures: eb('delivery_targets.failures', '+', 1),
      })),
    )
    .returning(['failing_since', 'failures'])
    .executeTakeFirstOrThrow() as Promise<{ failing_since: Date; failures: number }>;
}

/** Sets when a target's pending messages are next due (null: held); with `onlyBefore`, only those due sooner. */
async function setTargetBacklogDue(db: Db, targetKind: string, targetId: string, due: Date | null, onlyBefore?: Date): Promise<void> {
  let update = db
    .updateTable('outbound_deliveries')
    .set({ next_attempt_at: due })
    .where('target_kind', '=', targetKind)
    .where('target_id', '=', targetId)
    .where('delivered_at', 'is', null)
    .where('gave_up_at', 'is', null);
  if (onlyBefore) update = update.where('next_attempt_at', '<', onlyBefore);
  await update.execute();
}

/** A failing target's pending messages wait for its next probe: one at a time, not its whole backlog at every turn. */
export async function postponeTargetBacklog(db: Db, targetKind: string, targetId: string, until: Date): Promise<void> {
  await setTargetBacklogDue(db, targetKind, targetId, until, until);
}

/** Pauses a target: its pending messages are held until it resumes. False if it already was paused. */
export async function holdTarget(db: Db, targetKind: string, targetId: string, now: Date, reason: 'operator' | 'failing'): Promise<boolean> {
  const paused = await db
    .insertInto('delivery_targets')
    .values({ target_kind: targetKind, target_id: targetId, paused_at: now, pause_reason: reason })
    .onConflict((conflict) =>
      conflict.columns(['target_kind', 'target_id']).doUpdateSet({ paused_at: now, pause_reason: reason }).where('delivery_targets.paused_at', 'is', null),
    )
    .returning('target_id')
    .executeTakeFirst();
  if (!paused) return false;
  await setTargetBacklogDue(db, targetKind, targetId, null);
  return true;
}

/** Resumes a paused target: what it held is due at once, and it starts afresh (not failing). False if it was not paused. */
export async function releaseTarget(db: Db, targetKind: string, targetId: string, now: Date): Promise<boolean> {
  const resumed = await db
    .updateTable('delivery_targets')
    .set({ paused_at: null, pause_reason: null, failing_since: null, failures: 0 })
    .where('target_kind', '=', targetKind)
    .where('target_id', '=', targetId)
    .where('paused_at', 'is not', null)
    .returning('target_id')
    .executeTakeFirst();
  if (!resumed) return false;
  await setTargetBacklogDue(db, targetKind, targetId, now);
  return true;
}

export async function findTargetState(db: Db, targetKind: string, targetId: string) {
  return db
    .selectFrom('delivery_targets')
    .select(['failing_since', 'failures', 'paused_at', 'pause_reason'])
    .where('target_kind', '=', targetKind)
    .where('target_id', '=', targetId)
    .executeTakeFirst();
}

/** Everything of a target that is gone: its messages, their attempts, its state. */
export async function deleteTargetDeliveries(db: Db, targetKind: string, targetId: string): Promise<void> {
  await db.deleteFrom('outbound_deliveries').where('target_kind', '=', targetKind).where('target_id', '=', targetId).execute();
  await db.deleteFrom('delivery_targets').where('target_kind', '=', targetKind).where('target_id', '=', targetId).execute();
}

export interface AttemptFilter {
  /** Keyset paging: attempts after this one. */
  afterAttemptId?: string | undefined;
  limit: number;
}

/** A target's delivery log: one row per attempt, oldest first, with the message it was for. */
export async function listTargetAttempts(db: Db, targetKind: string, targetId: string, filter: AttemptFilter) {
  let query = db
    .selectFrom('delivery_attempts as a')
    .innerJoin('outbound_deliveries as d', 'd.delivery_id', 'a.delivery_id')
    .select([
      sql<string>`a.attempt_id::text`.as('attempt_id'),
      sql<string>`d.delivery_id::text`.as('delivery_id'),
      'd.message_id',
      sql<string | null>`d.event_id::text`.as('event_id'),
      'a.attempted_at',
      'a.http_status',
      'a.error',
      'a.duration_ms',
      'd.delivered_at',
      'd.gave_up_at',
    ])
    .where('d.target_kind', '=', targetKind)
    .where('d.target_id', '=', targetId)
    .orderBy('a.attempt_id', 'asc')
    .limit(filter.limit);
  if (filter.afterAttemptId !== undefined) query = query.where('a.attempt_id', '>', filter.afterAttemptId);
  return query.execute();
}

/** The message id a target was first given for an event, if any (a replay sends the same message again). */
export async function findMessageIds(db: Db, targetKind: string, targetId: string, eventIds: readonly string[]): Promise<Map<string, string>> {
  if (eventIds.length === 0) return new Map();
  const rows = await db
    .selectFrom('outbound_deliveries')
    .select([sql<string>`event_id::text`.as('event_id'), sql<string>`min(message_id)`.as('message_id')])
    .where('target_kind', '=', targetKind)
    .where('target_id', '=', targetId)
    .where('event_id', 'in', eventIds)
    .groupBy('event_id')
    .execute();
  return new Map(rows.map((row) => [row.event_id, row.message_id]));
}
