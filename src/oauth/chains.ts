import type { Transaction } from 'kysely';
import type { DB } from '../db/schema.js';
import type { Deps } from '../deps.js';
import { deleteAccessTokensOfLinks } from '../repositories/access-tokens.js';
import { insertLinkEvents, revokeLiveLinks, type RevokedLink } from '../repositories/device-links.js';

/** Why a chain ended, as recorded in link_events. */
export type RevocationReason =
  | 'reuse_detected'
  | 'revoked_by_app'
  | 'signed_out_by_user'
  | 'access_removed'
  | 'user_banned';

/**
 * Revokes whole chains (device links), in the caller's transaction: their refresh tokens stop
 * because a rotation needs a live link, and their access tokens are deleted, so both stop at the
 * commit. Records one event per chain.
 */
export async function revokeChains(
  trx: Transaction<DB>,
  filter: { linkId?: string; userId?: string; clientId?: string },
  reason: RevocationReason,
  context: { now: Date; ip: string | null },
): Promise<RevokedLink[]> {
  const revoked = await revokeLiveLinks(trx, filter, reason, context.now);
  // A statement of its own, after the links are locked: a rotation that committed while this
  // transaction waited for a link's lock added an access token this statement's (newer) snapshot
  // sees. In the same statement as the UPDATE (one CTE, one snapshot) that token would survive.
  // A rotation that comes after the lock finds the link revoked and adds none.
  await deleteAccessTokensOfLinks(trx, revoked.map((link) => link.link_id));
  await insertLinkEvents(
    trx,
    revoked.map((link) => ({
      link_id: link.link_id,
      user_id: link.user_id,
      client_id: link.client_id,
      event: 'revoked',
      reason,
      client_ip: context.ip,
      created_at: context.now,
    })),
  );
  return revoked;
}

/**
 * revokeChains in a transaction of its own, so the links and their events commit together,
 * counted by reason in the metrics. For callers that revoke as one step of their own.
 */
export async function revokeAndCountChains(
  deps: Deps,
  filter: { linkId?: string; userId?: string; clientId?: string },
  reason: RevocationReason,
  ip: string | null,
): Promise<RevokedLink[]> {
  const now = deps.clock.now();
  const revoked = await deps.db.transaction().execute((trx) => revokeChains(trx, filter, reason, { now, ip }));
  deps.metrics.chainRevocations.inc({ reason }, revoked.length);
  return revoked;
}
