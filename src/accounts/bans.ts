import type { Database } from '../db/connect.js';
import { actorColumn, recordEvents, type Actor } from '../events/event-log.js';
import type { Clock } from '../lib/clock.js';
import type { Metrics } from '../lib/metrics.js';
import { revokeGrants } from '../oauth/grant-revocation.js';
import { deleteSessionsOfUser, setUserBannedAt } from '../repositories/users.js';

/**
 * A ban ends everything at once: every grant is revoked and its access tokens deleted (so
 * unbanning revives no old token), every browser session is deleted, and sign-in is refused while
 * banned_at is set. The user's row is updated first: an issuance in flight holds it under a share
 * lock (lockUserForIssuance), so the ban waits for that grant and revokes it with the rest.
 * user.banned is recorded in the same transaction when the user was not banned before (a second
 * ban still ends whatever was issued since, each grant with its own event).
 */
export async function banUser(db: Database, email: string, now: Date, actor: Actor | null = null): Promise<{ user_id: string; revoked_grants: number } | null> {
  return db.transaction().execute(async (trx) => {
    const user = await setUserBannedAt(trx, email, now);
    if (!user) return null;
    const userId = user.user_id;
    const revoked = await revokeGrants(trx, { userId }, 'user_banned', { now, ip: null, actor });
    const sessionsEnded = await deleteSessionsOfUser(trx, userId);
    if (!user.was_banned) {
      await recordEvents(trx, [
        {
          type: 'user.banned',
          user_id: userId,
          created_at: now,
          actor: actorColumn(actor),
          data: JSON.stringify({ revoked_grants: revoked.length, sessions_ended: sessionsEnded }),
        },
      ]);
    }
    return { user_id: userId, revoked_grants: revoked.length };
  });
}

/**
 * banUser, counted: the grants a ban ends are revocations like any other in the metrics
 * (device_auth_grant_revocations_total, reason user_banned), as signing out or reuse are.
 */
export async function banUserAndCount(
  deps: { db: Database; clock: Clock; metrics: Pick<Metrics, 'grantRevocations'> },
  email: string,
  actor: Actor | null = null,
): Promise<{ user_id: string; revoked_grants: number } | null> {
  const result = await banUser(deps.db, email, deps.clock.now(), actor);
  if (result) deps.metrics.grantRevocations.inc({ reason: 'user_banned' }, result.revoked_grants);
  return result;
}

/** Lifts a ban; user.unbanned is recorded in the same transaction when the user was banned. */
export async function unbanUser(db: Database, email: string, actor: Actor | null = null, now: Date = new Date()): Promise<{ user_id: string } | null> {
  return db.transaction().execute(async (trx) => {
    const user = await setUserBannedAt(trx, email, null);
    if (!user) return null;
    if (user.was_banned) await recordEvents(trx, [{ type: 'user.unbanned', user_id: user.user_id, created_at: now, actor: actorColumn(actor) }]);
    return { user_id: user.user_id };
  });
}
