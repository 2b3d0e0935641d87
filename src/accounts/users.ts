import { z } from 'zod';
import type { Database } from '../db/connect.js';
import { MAX_PAGE_SIZE } from '../lib/paging.js';
import { storedText } from '../lib/stored-text.js';
import { deleteUserRow, findUserByEmail, insertUser, listUsers } from '../repositories/users.js';
import { hashPassword } from './passwords.js';

/** Emails are compared trimmed and lower-cased. */
export function normaliseEmail(email: string): string {
  return email.trim().toLowerCase();
}

export const newUserSchema = z.object({
  email: z.email().max(254),
  password: z.string().min(8, 'password must have at least 8 characters').max(1024),
  name: storedText.trim().min(1).max(100).optional(),
});

export async function createUser(db: Database, input: { email: string; password: string; name?: string | undefined }): Promise<{ user_id: string }> {
  const valid = newUserSchema.parse({ ...input, email: normaliseEmail(input.email) });
  const userId = await insertUser(db, {
    email: valid.email,
    password_hash: await hashPassword(valid.password),
    name: valid.name ?? null,
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
export async function registerUser(db: Database, input: { email: string; password: string; name?: string | undefined }): Promise<Registration> {
  const email = normaliseEmail(input.email);
  if (await findUserByEmail(db, email)) return { kind: 'exists', email };
  try {
    return { kind: 'created', ...(await createUser(db, input)) };
  } catch (error) {
    if (error instanceof Error && 'code' in error && error.code === '23505') return { kind: 'exists', email };
    throw error;
  }
}

/**
 * Deletes the user and everything of theirs at once: sessions, grants, tokens (so every device
 * and app is signed out on its next request), events and pending requests.
 */
export async function deleteUser(db: Database, email: string): Promise<{ user_id: string } | null> {
  const user = await findUserByEmail(db, normaliseEmail(email));
  if (!user) return null;
  return (await deleteUserRow(db, user.user_id)) ? { user_id: user.user_id } : null;
}
