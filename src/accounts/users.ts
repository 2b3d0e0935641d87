import { z } from 'zod';
import type { Database } from '../db/connect.js';
import type { Deps } from '../deps.js';
import { actorColumn, recordEvents, type Actor } from '../events/event-log.js';
import { MAX_PAGE_SIZE } from '../lib/paging.js';
import { storedText } from '../lib/stored-text.js';
import { revokeGrants } from '../oauth/grant-revocation.js';
import {
  deleteSessionsOfUser,
  deleteUserRow,
  findUserByEmail,
  insertUser,
  listUsers,
  lockUserByEmail,
  setPasswordHash,
  setUserName,
} from '../repositories/users.js';
import { hashPassword } from './passwords.js';

/** Emails are compared trimmed and lower-cased. */
export function normaliseEmail(email: string): string {
  return email.trim().toLowerCase();
}

// Stored text although only its hash is stored: a lone surrogate would be hashed as U+FFFD, so two passwords would be one.
const password = storedText.min(8, 'password must have at least 8 characters').max(1024);
const userName = storedText.trim().min(1).max(100);

export const newUserSchema = z.object({
  email: z.email().max(254),
  password,
  name: userName.optional(),
});

/**
 * A new user and its user.created event, in one transaction. The event names the user by id
 * only: the event log outlives the account (EVENT_RETENTION_DAYS), the email does not.
 */
export async function createUser(
  db: Database,
  input: { email: string; password: string; name?: string | undefined },
  context: { actor?: Actor | null; now?: Date } = {},
): Promise<{ user_id: string }> {
  const valid = newUserSchema.parse({ ...input, email: normaliseEmail(input.email) });
  const passwordHash = await hashPassword(valid.password);
  const userId = await db.transaction().execute(async (trx) => {
    const id = await insertUser(trx, { email: valid.email, password_hash: passwordHash, name: valid.name ?? null });
    await recordEvents(trx, [{ type: 'user.created', user_id: id, created_at: context.now ?? new Date(), actor: actorColumn(context.actor) }]);
    return id;
  });
  return { user_id: userId };
}

/** What an operator sees of a user: never the password hash. */
export interface UserView {
  user_id: string;
  email: string;
  name: string | null;
  created_at: string;
  banned: boolean;
}

function toUserView(row: { user_id: string; email: string; name: string | null; created_at: Date; banned_at: Date | null }): UserView {
  return { user_id: row.user_id, email: row.email, name: row.name, created_at: row.created_at.toISOString(), banned: row.banned_at !== null };
}

export async function userPage(db: Database, page: { search?: string | undefined; after?: string | undefined; limit: number }): Promise<UserView[]> {
  return (await listUsers(db, { ...page, limit: Math.min(page.limit, MAX_PAGE_SIZE) })).map(toUserView);
}

export async function showUser(db: Database, email: string): Promise<UserView | undefined> {
  const row = await findUserByEmail(db, normaliseEmail(email));
  return row ? toUserView(row) : undefined;
}

export type Registration = { kind: 'created'; user_id: string } | { kind: 'exists'; email: string };

/** createUser for operators: an email already taken is an answer, not an error (also in a race). */
export async function registerUser(
  deps: Pick<Deps, 'db' | 'clock'>,
  input: { email: string; password: string; name?: string | undefined },
  actor: Actor,
): Promise<Registration> {
  const email = normaliseEmail(input.email);
  if (await findUserByEmail(deps.db, email)) return { kind: 'exists', email };
  try {
    return { kind: 'created', ...(await createUser(deps.db, input, { actor, now: deps.clock.now() })) };
  } catch (error) {
    if (error instanceof Error && 'code' in error && error.code === '23505') return { kind: 'exists', email };
    throw error;
  }
}

export const userChangesSchema = z.object({ name: userName.nullable().describe('null: no name') }).strict();
export type UserChanges = z.output<typeof userChangesSchema>;

/**
 * An operator's change of a user's details (today: the name), with its user.changed event naming
 * the fields changed, never their values. Null: no such user.
 */
export async function changeUser(deps: Pick<Deps, 'db' | 'clock'>, email: string, changes: UserChanges, actor: Actor): Promise<{ user_id: string } | null> {
  const valid = userChangesSchema.parse(changes);
  return deps.db.transaction().execute(async (trx) => {
    const userId = await setUserName(trx, normaliseEmail(email), valid.name);
    if (!userId) return null;
    await recordEvents(trx, [
      { type: 'user.changed', user_id: userId, created_at: deps.clock.now(), actor: actorColumn(actor), data: JSON.stringify({ fields: ['name'] }) },
    ]);
    return { user_id: userId };
  });
}

export const newPasswordSchema = z.object({ password }).strict();

/**
 * An operator sets a user's password: the new one is hashed (argon2id), and every browser session
 * of the user ends in the same transaction, so whoever signed in with the old password signs in
 * again; devices and apps keep their grants (a receiver of user.password_changed decides for its
 * own sessions, as CAEP credential-change intends). Null: no such user.
 */
export async function changePassword(
  deps: Pick<Deps, 'db' | 'clock'>,
  email: string,
  newPassword: string,
  actor: Actor,
): Promise<{ user_id: string; sessions_ended: number } | null> {
  const valid = newPasswordSchema.parse({ password: newPassword });
  const passwordHash = await hashPassword(valid.password);
  return deps.db.transaction().execute(async (trx) => {
    const userId = await setPasswordHash(trx, normaliseEmail(email), passwordHash);
    if (!userId) return null;
    const sessionsEnded = await deleteSessionsOfUser(trx, userId);
    await recordEvents(trx, [
      {
        type: 'user.password_changed',
        user_id: userId,
        created_at: deps.clock.now(),
        actor: actorColumn(actor),
        data: JSON.stringify({ sessions_ended: sessionsEnded }),
      },
    ]);
    return { user_id: userId, sessions_ended: sessionsEnded };
  });
}

/**
 * Deletes the user and everything of theirs at once, in one transaction: every live grant is
 * revoked first (grant.revoked, reason user_deleted, so that receivers hear each session end),
 * then the row goes, taking sessions, grants, tokens and pending requests with it, and
 * user.deleted is recorded. The user's events stay, naming them by id (never by email), until
 * EVENT_RETENTION_DAYS have passed.
 */
export async function deleteUser(
  deps: Pick<Deps, 'db' | 'clock' | 'metrics'>,
  email: string,
  actor: Actor | null = null,
): Promise<{ user_id: string; revoked_grants: number } | null> {
  const now = deps.clock.now();
  const result = await deps.db.transaction().execute(async (trx) => {
    const userId = await lockUserByEmail(trx, normaliseEmail(email));
    if (!userId) return null;
    const revoked = await revokeGrants(trx, { userId }, 'user_deleted', { now, ip: null, actor });
    if (!(await deleteUserRow(trx, userId))) return null;
    await recordEvents(trx, [
      { type: 'user.deleted', user_id: userId, created_at: now, actor: actorColumn(actor), data: JSON.stringify({ revoked_grants: revoked.length }) },
    ]);
    return { user_id: userId, revoked_grants: revoked.length };
  });
  if (result) deps.metrics.grantRevocations.inc({ reason: 'user_deleted' }, result.revoked_grants);
  return result;
}
