import type { Deps } from '../deps.js';
import { recordEvents } from '../events/event-log.js';
import { addSeconds } from '../lib/clock.js';
import { hmacSha256, randomToken, safeEqual } from '../lib/random.js';
import { hashOpaque, mintOpaque, TOKEN_PREFIX } from '../oauth/opaque-tokens.js';
import { deleteBrowserSession, findLiveBrowserSession, insertBrowserSession } from '../repositories/browser-sessions.js';
import { findUserByEmail } from '../repositories/users.js';
import type { PasswordCheckPlace } from './password-checks.js';
import { verifyPassword } from './passwords.js';
import { normaliseEmail } from './users.js';

export interface SignedInUser {
  userId: string;
  /** Shown on every page ("Signed in as …"), so a user notices being in someone else's account. */
  email: string;
  /** When the user proved who they are: the auth_time of the tokens they approve. */
  authTime: Date;
}

/** A browser with a session row: signed in, or signed in as a user banned since. */
export interface StoredSession {
  kind: 'stored';
  /** SHA-256 of the cookie value: names the row, never leaves the server. */
  hash: Uint8Array;
  csrfToken: string;
  user: SignedInUser | null;
}

/**
 * A visitor who has not signed in. It has no row: its cookie holds a random nonce, and the CSRF
 * token of its forms is an HMAC of that nonce under a server key (OWASP's signed double submit),
 * so only this server can make the token, and only for the browser holding that cookie.
 */
export interface AnonymousVisit {
  kind: 'anonymous';
  csrfToken: string;
  user: null;
}

/** A browser as the pages see it. Only a StoredSession names a row, so only it can be ended. */
export type BrowserSession = StoredSession | AnonymousVisit;

export interface StartedSession {
  /** Goes into the cookie once; only its hash is stored. */
  cookieValue: string;
  session: StoredSession;
}

export interface StartedVisit {
  /** Goes into the anonymous cookie; nothing is stored. */
  cookieValue: string;
  visit: AnonymousVisit;
}

/** A new session row (replacing the browser's old one, if any) and its session.signed_in event, in one transaction. */
async function startSession(deps: Deps, user: SignedInUser, replacing: Uint8Array | undefined, ip: string | null): Promise<StartedSession> {
  const minted = mintOpaque(TOKEN_PREFIX.session);
  const csrfSecret = randomToken(32);
  const now = deps.clock.now();
  const row = {
    session_hash: minted.hash,
    user_id: user.userId,
    csrf_secret: csrfSecret,
    created_at: now,
    expires_at: addSeconds(now, deps.config.sessionTtl),
    auth_time: user.authTime,
  };
  await deps.db.transaction().execute(async (trx) => {
    if (replacing) await deleteBrowserSession(trx, replacing);
    await insertBrowserSession(trx, row);
    await recordEvents(trx, [{ type: 'session.signed_in', user_id: user.userId, client_ip: ip, created_at: now }]);
  });
  return { cookieValue: minted.value, session: { kind: 'stored', hash: minted.hash, csrfToken: csrfSecret, user } };
}

const ANONYMOUS_NONCE = new RegExp(`^${TOKEN_PREFIX.anonymousVisit}[A-Za-z0-9_-]{43}$`);

function anonymousVisit(deps: Deps, nonce: string): AnonymousVisit {
  const csrfToken = hmacSha256(deps.secrets.anonymousCsrfKey, nonce).toString('base64url');
  return { kind: 'anonymous', csrfToken, user: null };
}

/** A first page load without a session: 256 random bits for the cookie, and no database write. */
export function startAnonymousVisit(deps: Deps): StartedVisit {
  const nonce = `${TOKEN_PREFIX.anonymousVisit}${randomToken(32)}`;
  return { cookieValue: nonce, visit: anonymousVisit(deps, nonce) };
}

/**
 * The anonymous visit an anonymous cookie names. Any nonce of the right shape is taken: a nonce
 * the visitor made up only yields a token the visitor cannot compute, so no form of theirs passes.
 */
export function findAnonymousVisit(deps: Deps, cookieValue: string): AnonymousVisit | null {
  return ANONYMOUS_NONCE.test(cookieValue) ? anonymousVisit(deps, cookieValue) : null;
}

/** What mintOpaque gives a session: the prefix and 32 bytes in base64url. */
const SESSION_COOKIE_VALUE = new RegExp(`^${TOKEN_PREFIX.session}[A-Za-z0-9_-]{43}$`);

/**
 * The live session a cookie names. A banned user's session no longer counts as signed in. A
 * cookie of any other shape (odd bytes, any length) is no session, without a database lookup.
 */
export async function findSession(deps: Deps, cookieValue: string): Promise<StoredSession | null> {
  if (!SESSION_COOKIE_VALUE.test(cookieValue)) return null;
  const hash = hashOpaque(cookieValue);
  const row = await findLiveBrowserSession(deps.db, hash, deps.clock.now());
  if (!row) return null;
  const user =
    row.user_id !== null && row.auth_time !== null && row.banned_at === null && row.email !== null
      ? { userId: row.user_id, email: row.email, authTime: row.auth_time }
      : null;
  return { kind: 'stored', hash, csrfToken: row.csrf_secret, user };
}

/** Constant time, for a stored session's secret and an anonymous visit's HMAC alike. */
export function isValidCsrfToken(session: BrowserSession, submitted: string): boolean {
  return safeEqual(session.csrfToken, submitted);
}

export type SignInResult = { kind: 'signed_in'; started: StartedSession } | { kind: 'wrong_credentials' } | { kind: 'banned' };

/**
 * Checks the password in the place the caller was admitted to (see PasswordChecks) and, on
 * success, writes the browser's first session row, or replaces the one it had (new cookie value,
 * new CSRF secret): a cookie planted or seen before sign-in is worth nothing after it. This is
 * the only place a session row is written.
 *
 * A refusal changes nothing, so its session.sign_in_refused event is an observation, written on
 * its own (reason wrong_credentials or banned). It is written only for an account that exists:
 * the event names the user by id, and an unknown email names nobody (nor is it kept, being what a
 * stranger typed); the sign-in limits bound how many one account can gather.
 */
export async function signIn(
  deps: Deps,
  current: BrowserSession | null,
  credentials: { email: string; password: string },
  place: PasswordCheckPlace,
  ip: string | null = null,
): Promise<SignInResult> {
  const user = await findUserByEmail(deps.db, normaliseEmail(credentials.email));
  const verified = await place.run(() => verifyPassword(user?.password_hash, credentials.password));
  const refused = async (reason: 'wrong_credentials' | 'banned') => {
    if (user) await recordEvents(deps.db, [{ type: 'session.sign_in_refused', user_id: user.user_id, reason, client_ip: ip, created_at: deps.clock.now() }]);
    return { kind: reason };
  };
  if (!verified || !user) return refused('wrong_credentials');
  // Only someone who knows the password learns that the account is banned.
  if (user.banned_at !== null) return refused('banned');
  const replacing = current?.kind === 'stored' ? current.hash : undefined;
  const started = await startSession(deps, { userId: user.user_id, email: user.email, authTime: deps.clock.now() }, replacing, ip);
  return { kind: 'signed_in', started };
}

/**
 * Ends the browser's session, with its session.signed_out event in the same transaction (when the
 * row was still there and had a user: a second sign-out, or one racing the purge, ends nothing). `clientId`: the
 * app that sent the browser to sign out (RP-Initiated Logout), if any.
 */
export async function signOut(deps: Deps, session: StoredSession, ip: string | null = null, clientId: string | null = null): Promise<void> {
  await deps.db.transaction().execute(async (trx) => {
    const userId = await deleteBrowserSession(trx, session.hash);
    // A session of nobody (a browser that never signed in) ends without an event: it names no one.
    if (userId === undefined || userId === null) return;
    await recordEvents(trx, [{ type: 'session.signed_out', user_id: userId, client_id: clientId, client_ip: ip, created_at: deps.clock.now() }]);
  });
}
