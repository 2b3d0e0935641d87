import type { Transaction } from 'kysely';
import type { DB } from '../db/schema.js';
import type { Deps } from '../deps.js';
import { deleteAccessTokensOfGrants } from '../repositories/access-tokens.js';
import { actorColumn, recordEvents, type Actor } from '../events/event-log.js';
import { revokeLiveGrants, type RevocationFilter, type RevokedGrant } from '../repositories/grants.js';

/** Why a grant ended, as recorded with its grant.revoked event. */
export type RevocationReason =
  | 'reuse_detected'
  /** RFC 6749 §4.1.2: an authorization code redeemed twice revokes what the first redemption issued. */
  | 'code_replayed'
  | 'revoked_by_app'
  | 'signed_out_by_user'
  | 'access_removed'
  | 'user_banned'
  /** The user was deleted: every grant ends with a revocation of its own before the cascade removes it. */
  | 'user_deleted'
  /** The app was deleted, likewise. */
  | 'app_deleted'
  /** Issue 31 §3: an operator's bulk revocation (POST /admin/grants/revoke); its event names the operation. */
  | 'operator_revoked';

/**
 * Revokes whole grants, in the caller's transaction: their refresh tokens stop
 * because a rotation needs a live grant, and their access tokens are deleted, so both stop at the
 * commit. Records one event per grant.
 */
export async function revokeGrants(
  trx: Transaction<DB>,
  filter: RevocationFilter,
  reason: RevocationReason,
  /** `details`: JSON recorded with each event (a bulk revocation's operation id); `actor`: who ended them, when not the grant's user or app by the reason. */
  context: { now: Date; ip: string | null; details?: string; actor?: Actor | null },
): Promise<RevokedGrant[]> {
  const revoked = await revokeLiveGrants(trx, filter, reason, context.now);
  // A statement of its own, after the grants are locked: a rotation that committed while this
  // transaction waited for a grant's lock added an access token this statement's (newer) snapshot
  // sees. In the same statement as the UPDATE (one CTE, one snapshot) that token would survive.
  // A rotation that comes after the lock finds the grant revoked and adds none.
  await deleteAccessTokensOfGrants(
    trx,
    revoked.map((grant) => grant.grant_id),
  );
  await recordEvents(
    trx,
    revoked.map((grant) => ({
      grant_id: grant.grant_id,
      user_id: grant.user_id,
      client_id: grant.client_id,
      type: 'grant.revoked',
      reason,
      client_ip: context.ip,
      created_at: context.now,
      data: context.details ?? null,
      actor: actorColumn(context.actor),
    })),
  );
  return revoked;
}

/**
 * revokeGrants in a transaction of its own, so the grants and their events commit together,
 * counted by reason in the metrics. For callers that revoke as one step of their own.
 */
export async function revokeAndCountGrants(
  deps: Pick<Deps, 'db' | 'clock' | 'metrics'>,
  filter: RevocationFilter,
  reason: RevocationReason,
  ip: string | null,
  actor: Actor | null = null,
): Promise<RevokedGrant[]> {
  const now = deps.clock.now();
  const revoked = await deps.db.transaction().execute((trx) => revokeGrants(trx, filter, reason, { now, ip, actor }));
  deps.metrics.grantRevocations.inc({ reason }, revoked.length);
  return revoked;
}
