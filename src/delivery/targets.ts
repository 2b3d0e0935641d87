import type { Transaction } from 'kysely';
import type { Database } from '../db/connect.js';
import type { DB } from '../db/schema.js';
import { deleteTargetDeliveries, findTargetState, holdTarget, insertDeliveries, type NewDelivery, releaseTarget } from '../repositories/outbound-deliveries.js';

/**
 * What a kind (webhooks, Shared Signals push) asks of the engine about its targets. Each takes
 * the kind's transaction, so that a change of the target and of its deliveries commit together.
 */

type Db = Database | Transaction<DB>;

export type { NewDelivery } from '../repositories/outbound-deliveries.js';

/** Queues messages (in a consumer's `take`): due at once, or held while their target is paused. */
export function enqueueDeliveries(db: Db, deliveries: readonly NewDelivery[], now: Date): Promise<void> {
  return insertDeliveries(db, deliveries, now);
}

/** Pauses a target for the operator: nothing is sent, everything is kept. False if it already was paused. */
export function pauseTarget(db: Db, kind: string, id: string, now: Date): Promise<boolean> {
  return holdTarget(db, kind, id, now, 'operator');
}

/** Resumes a target however it was paused: its backlog is due at once. False if it was not paused. */
export function resumeTarget(db: Db, kind: string, id: string, now: Date): Promise<boolean> {
  return releaseTarget(db, kind, id, now);
}

/** A target that is gone: its messages, their attempts and its state go with it. */
export function forgetTarget(db: Db, kind: string, id: string): Promise<void> {
  return deleteTargetDeliveries(db, kind, id);
}

export interface TargetState {
  /** Paused, by the operator or because it kept failing; null when it is active. */
  paused: { at: Date; reason: 'operator' | 'failing' } | null;
  /** When its current run of failures began; null when its last attempt succeeded. */
  failingSince: Date | null;
}

export async function targetState(db: Db, kind: string, id: string): Promise<TargetState> {
  const row = await findTargetState(db, kind, id);
  return {
    paused: row?.paused_at && row.pause_reason ? { at: row.paused_at, reason: row.pause_reason } : null,
    failingSince: row?.failing_since ?? null,
  };
}
