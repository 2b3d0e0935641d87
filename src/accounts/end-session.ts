import type { Deps } from '../deps.js';
import { postLogoutLocation, type EndSessionRequest } from '../oauth/end-session.js';
import { signOut, type BrowserSession } from './sessions.js';

export type EndSessionOutcome =
  /** Ask the user first: the request is not tied to whoever is signed in here. */
  | { kind: 'confirm'; request: EndSessionRequest }
  /** Nobody is signed in here any more; `location` is the app's registered address, if it gave one. */
  | { kind: 'signed_out'; location: string | null; ended: boolean };

/**
 * OpenID Connect RP-Initiated Logout 1.0 §2-§3 for this browser. A session is ended without a
 * question only when the app's ID token names the user signed in here (§2: "the OP SHOULD ask
 * the End-User whether to log out" when the hint does not identify the session); otherwise the
 * user confirms on our page first (`confirmed`, a CSRF-checked form). A browser with nobody signed
 * in has nothing to end and goes straight on.
 *
 * Only the browser session ends: the app's grants and tokens, and every device's, stay as they
 * are (the app revokes its own tokens at /oauth/revoke; devices are signed out on the Devices page).
 */
export async function endBrowserSession(
  deps: Deps,
  session: BrowserSession | null,
  request: EndSessionRequest,
  confirmed: boolean,
  ip: string | null = null,
): Promise<EndSessionOutcome> {
  const location = postLogoutLocation(request);
  if (session?.kind !== 'stored') return { kind: 'signed_out', location, ended: false };
  // A banned user's session (user null) no longer signs anyone in: ending it asks nothing.
  const tied = session.user === null || (request.hintSubject !== null && request.hintSubject === session.user.userId);
  if (!tied && !confirmed) return { kind: 'confirm', request };
  await signOut(deps, session, ip, request.client?.clientId ?? null);
  return { kind: 'signed_out', location, ended: true };
}
