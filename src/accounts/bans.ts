import type { Database } from '../db/connect.js';
import { revokeGrants } from '../oauth/grant-revocation.js';
import { deleteSessionsOfUser, setUserBannedAt } from '../repositories/users.js';

/**
 * A ban ends everything at once: every grant is revoked and its access tokens deleted (so
 * unbanning revives no old token), every browser session is deleted, and sign-in is refused while
 * banned_at is set. The user's row is updated first: an issuance in flight holds it under a share
 * lock (lockUserForIssuance), so the ban waits for that grant and revokes it with the rest.
 */
export async function banUser(db: Database, email: string, now: Date): Promise<{ user_id: string; revoked_grants: number } | null> {
  return db.transaction().execute(async (trx) => {
    const userId = await setUserBannedAt(trx, email, now);
    if (!userId) return null;
    const revoked = await revokeGrants(trx, { userId }, 'user_banned', { now, ip: null });
    await deleteSessionsOfUser(trx, userId);
    return { user_id: userId, revoked_grants: revoked.length };
  });
}

export async function unbanUser(db: Database, email: string): Promise<{ user_id: string } | null> {
  const userId = await setUserBannedAt(db, email, null);
  return userId ? { user_id: userId } : null;
}
