import { z } from 'zod';
import type { Database } from '../db/connect.js';
import { insertUser } from '../repositories/users.js';
import { hashPassword } from './passwords.js';

/** Emails are compared trimmed and lower-cased. */
export function normaliseEmail(email: string): string {
  return email.trim().toLowerCase();
}

export const newUserSchema = z.object({
  email: z.email().max(254),
  password: z.string().min(8, 'password must have at least 8 characters').max(1024),
  name: z.string().trim().min(1).max(100).optional(),
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
