import type { Deps } from '../deps.js';
import { addSeconds } from '../lib/clock.js';
import { randomToken, safeEqual } from '../lib/random.js';
import { hashOpaque, mintOpaque, TOKEN_PREFIX } from '../oauth/tokens.js';
import { deleteBrowserSession, findLiveBrowserSession, insertBrowserSession } from '../repositories/browser-sessions.js';
import { findUserByEmail } from '../repositories/users.js';
import { verifyPassword } from './passwords.js';
import { normaliseEmail } from './users.js';

export interface SignedInUser {
  userId: string;
  /** When the user proved who they are: the auth_time of the tokens they approve. */
  authTime: Date;
}

/** A browser's session as the pages see it; anonymous until the visitor signs in. */
export interface BrowserSession {
  /** SHA-256 of the cookie value: names the row, never leaves the server. */
  hash: Uint8Array;
  csrfToken: string;
  user: SignedInUser | null;
}

export interface StartedSession {
  /** Goes into the cookie once; only its hash is stored. */
  cookieValue: string;
  session: BrowserSession;
}

async function startSession(deps: Deps, user: SignedInUser | null, replacing?: Uint8Array): Promise<StartedSession> {
  const minted = mintOpaque(TOKEN_PREFIX.session);
  const csrfSecret = randomToken(32);
  const now = deps.clock.now();
  const row = {
    session_hash: minted.hash,
    user_id: user?.userId ?? null,
    csrf_secret: csrfSecret,
    created_at: now,
    expires_at: addSeconds(now, deps.config.sessionTtl),
    auth_time: user?.authTime ?? null,
  };
  if (replacing) {
    await deps.db.transaction().execute(async (trx) => {
      await deleteBrowserSession(trx, replacing);
      await insertBrowserSession(trx, row);
    });
  } else {
    await insertBrowserSession(deps.db, row);
  }
  return { cookieValue: minted.value, session: { hash: minted.hash, csrfToken: csrfSecret, user } };
}

/** Every visitor gets one at the first page, so that even the sign-in form carries a CSRF token. */
export function startAnonymousSession(deps: Deps): Promise<StartedSession> {
  return startSession(deps, null);
}

/** The live session a cookie names. A banned user's session no longer counts as signed in. */
export async function findSession(deps: Deps, cookieValue: string): Promise<BrowserSession | null> {
  if (!cookieValue.startsWith(TOKEN_PREFIX.session)) return null;
  const hash = hashOpaque(cookieValue);
  const row = await findLiveBrowserSession(deps.db, hash, deps.clock.now());
  if (!row) return null;
  const user =
    row.user_id !== null && row.auth_time !== null && row.banned_at === null ? { userId: row.user_id, authTime: row.auth_time } : null;
  return { hash, csrfToken: row.csrf_secret, user };
}

export function isValidCsrfToken(session: BrowserSession, submitted: string): boolean {
  return safeEqual(session.csrfToken, submitted);
}

export type SignInResult = { kind: 'signed_in'; started: StartedSession } | { kind: 'wrong_credentials' } | { kind: 'banned' };

/**
 * Checks the password and, on success, replaces the browser's session with a new one (new
 * cookie value, new CSRF secret): a session id planted before sign-in is worth nothing after it.
 */
export async function signIn(
  deps: Deps,
  current: BrowserSession | null,
  credentials: { email: string; password: string },
): Promise<SignInResult> {
  const user = await findUserByEmail(deps.db, normaliseEmail(credentials.email));
  if (!(await verifyPassword(user?.password_hash, credentials.password)) || !user) return { kind: 'wrong_credentials' };
  // Only someone who knows the password learns that the account is banned.
  if (user.banned_at !== null) return { kind: 'banned' };
  const started = await startSession(deps, { userId: user.user_id, authTime: deps.clock.now() }, current?.hash);
  return { kind: 'signed_in', started };
}

export async function signOut(deps: Deps, session: BrowserSession): Promise<void> {
  await deleteBrowserSession(deps.db, session.hash);
}
