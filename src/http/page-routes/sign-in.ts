import type { FastifyInstance, FastifyReply } from 'fastify';
import { z } from 'zod';
import type { Deps } from '../../deps.js';
import { normaliseEmail } from '../../accounts/users.js';
import { setTimeout as sleep } from 'node:timers/promises';
import { sha256 } from '../../lib/random.js';
import { limitedAddress, waitText } from '../rate-limit.js';
import { guardedAttempt } from '../../rate-limits/guarded-attempt.js';
import { addressPrefixes } from '../../lib/client-address.js';
import type { Reservation } from '../../rate-limits/limiter.js';
import { PasswordChecksBusy } from '../../accounts/password-checks.js';
import { signIn, signOut } from '../../accounts/sessions.js';
import { parsePageForm } from '../form.js';
import { clearAnonymousCookie, clearSessionCookie, setSessionCookie } from '../plugins/session.js';
import { renderPage } from './render.js';
import { AUTHORIZE_PATH } from '../../oauth/authorize/decision.js';
import { pageCspAllowingFormsTo } from '../plugins/security-headers.js';
import type { MessageKey } from '../../i18n/catalogues.js';
import { translatorFor } from '../page-language.js';

const DEFAULT_RETURN_PATH = '/activate';
const RETURN_PATHS = /^\/(activate|account)(\/|$)|^\/oauth\/authorize$/;
const PARSE_BASE = 'http://return-to.invalid';

/** Far more than any page of ours links to; a longer address would only bloat the Location header. */
const MAX_RETURN_PATH_LENGTH = 1024;
/** An authorization request comes back through sign-in whole: its redirect URI, state and nonce are bounded well below this. */
export const MAX_AUTHORIZE_RETURN_LENGTH = 4096;

/**
 * Open-redirect defence: only a path on this server under /activate or /account, or the
 * authorization endpoint (which checks its own request before redirecting anywhere); anything else
 * (an absolute URL, //host, /\host, ../ tricks, an address over its bound before or after
 * re-encoding) falls back to /activate. The value that reaches the Location header is the URL
 * parser's re-serialisation, never the raw input.
 */
function localReturnPath(requested: string): string {
  if (requested.length > MAX_AUTHORIZE_RETURN_LENGTH) return DEFAULT_RETURN_PATH;
  let url: URL;
  try {
    url = new URL(requested, PARSE_BASE);
  } catch {
    return DEFAULT_RETURN_PATH;
  }
  if (url.origin !== PARSE_BASE || !RETURN_PATHS.test(url.pathname)) return DEFAULT_RETURN_PATH;
  const local = url.pathname + url.search;
  const bound = url.pathname === AUTHORIZE_PATH ? MAX_AUTHORIZE_RETURN_LENGTH : MAX_RETURN_PATH_LENGTH;
  return local.length > bound || requested.length > bound ? DEFAULT_RETURN_PATH : local;
}

export function signInUrl(returnTo: string, { again = false }: { again?: boolean } = {}): string {
  return `/signin?return_to=${encodeURIComponent(returnTo)}${again ? '&again=1' : ''}`;
}

/**
 * On the way to a web app, the sign-in form's answer may redirect (through the authorization
 * endpoint) to the app's redirect URI: the page's form-action allows that origin, once the app is
 * known to have registered it.
 */
async function allowFormsOnTheWayTo(deps: Deps, reply: FastifyReply, returnTo: string): Promise<void> {
  if (!returnTo.startsWith(`${AUTHORIZE_PATH}?`)) return;
  const query = new URLSearchParams(returnTo.slice(AUTHORIZE_PATH.length + 1));
  const clientId = query.get('client_id');
  const redirectUri = query.get('redirect_uri');
  if (clientId === null || redirectUri === null) return;
  const client = await deps.clients.findStatic(clientId);
  if (client?.redirectUris.includes(redirectUri)) reply.header('Content-Security-Policy', pageCspAllowingFormsTo(redirectUri));
}

const signInQuery = z.object({ return_to: z.string().default(''), again: z.literal('1').optional().catch(undefined) });
const signInForm = z.object({
  email: z.string().default(''),
  password: z.string().default(''),
  return_to: z.string().default(''),
});

const signOutForm = z.object({ return_to: z.string().optional() });

const REFUSALS = {
  // One message for an unknown email and a wrong password: the page reveals no accounts.
  wrong_credentials: { status: 401, message: 'signin.wrong_credentials' },
  banned: { status: 403, message: 'signin.banned' },
} as const satisfies Record<string, { status: number; message: MessageKey }>;

const BUSY_RETRY_SECONDS = 1;

/**
 * Failed sign-ins are limited so that nobody can lock another person out: strictly per account
 * and address, and per address (spraying many accounts); per account only past a higher
 * threshold, and then only for addresses that already failed on it. The owner, signing in from an
 * address with no failures, is slowed (signInSlowdownMs) but never refused by what others did.
 */
function signInLimit(reservation: Reservation) {
  const strict = reservation.verdict(['signInPerAccountIp', 'signInPerIp']);
  if (strict.limited) return strict;
  if (reservation.over('signInPerAccount') && reservation.earlierFailures('signInPerAccountIp') > 0) {
    return reservation.verdict(['signInPerAccount']);
  }
  return strict;
}

export function signInRoutes(app: FastifyInstance, deps: Deps): void {
  app.get('/signin', async (request, reply) => {
    const query = parsePageForm(signInQuery, request.query);
    const returnTo = localReturnPath(query.return_to);
    const signedIn = Boolean(request.session?.user);
    const again = signedIn && query.again !== undefined;
    if (signedIn && !again) return reply.redirect(returnTo, 303);
    await allowFormsOnTheWayTo(deps, reply, returnTo);
    const i18n = translatorFor(request);
    const notice = again ? i18n.t('signin.again') : null;
    return renderPage(request, reply, 'signin.eta', { title: i18n.t('signin.title'), returnTo, email: '', message: null, notice });
  });

  app.post('/signin', async (request, reply) => {
    const form = parsePageForm(signInForm, request.body);
    const returnTo = localReturnPath(form.return_to);
    const i18n = translatorFor(request);
    const renderSignIn = async (message: string, status: number) => {
      await allowFormsOnTheWayTo(deps, reply, returnTo);
      return renderPage(request, reply, 'signin.eta', { title: i18n.t('signin.title'), returnTo, email: form.email, message, notice: null }, status);
    };
    const address = limitedAddress(deps, request);
    // Hashed: counters carry no email, and a key's length does not depend on what was typed.
    const account = sha256(normaliseEmail(form.email)).toString('base64url');
    const sender = { address, networks: addressPrefixes(request.ip), account };
    const busy = () => {
      reply.header('Retry-After', String(BUSY_RETRY_SECONDS));
      return renderSignIn(i18n.t('signin.busy'), 503);
    };
    // Before any other work: a flood is turned away without a password check, and its refusal counts
    // against its address as a failure (never given back), so that a flood uses up its own attempts.
    const admission = deps.passwordChecks.admit(sender);
    if (!admission.admitted) {
      await deps.rateLimiter.reserve([['signInPerIp', address]], deps.clock.now()).catch(() => undefined);
      return busy();
    }
    try {
      const guarded = await guardedAttempt(deps.rateLimiter, deps.clock.now(), {
        limits: [
          ['signInPerAccountIp', `${account} ${address}`],
          ['signInPerIp', address],
          ['signInPerAccount', account],
        ],
        verdict: signInLimit,
        evaluate: async (reservation) => {
          // An account under attack from many addresses: an address that has not failed on it is slowed, not refused.
          if (reservation.over('signInPerAccount')) await sleep(deps.config.signInSlowdownMs);
          try {
            return await signIn(deps, request.session, form, admission.place, request.ip);
          } catch (error) {
            if (error instanceof PasswordChecksBusy) return { kind: 'busy' as const };
            throw error;
          }
        },
        // Only failures count: a right password (banned or not) gives its counts back. Turned away
        // for capacity, the attempt counts against the address, not against the account.
        kept: (result) => (result.kind === 'wrong_credentials' ? 'all' : result.kind === 'busy' ? (['signInPerIp'] as const) : 'none'),
      });
      if (guarded.limited) {
        reply.header('Retry-After', String(guarded.retryAfterSeconds));
        return renderSignIn(i18n.t('signin.too_many', { wait: waitText(i18n, guarded.retryAfterSeconds) }), 429);
      }
      const result = guarded.outcome;
      if (result.kind === 'busy') return busy();
      if (result.kind === 'signed_in') {
        // This address and this account come first in the password-check queue from now on.
        deps.passwordChecks.succeeded(sender);
        setSessionCookie(reply, deps.config, result.started.cookieValue);
        clearAnonymousCookie(reply, deps.config);
        return reply.redirect(returnTo, 303);
      }
      const refusal = REFUSALS[result.kind];
      return renderSignIn(i18n.t(refusal.message), refusal.status);
    } finally {
      admission.place.leave();
    }
  });

  app.post('/signout', async (request, reply) => {
    const form = parsePageForm(signOutForm, request.body);
    // An anonymous visitor has no row to end; the sign-in page it lands on keeps it anonymous.
    if (request.session?.kind === 'stored') await signOut(deps, request.session, request.ip);
    clearSessionCookie(reply, deps.config);
    // "Not you?" names the page it was pressed on: the next person signs in and carries on there.
    return reply.redirect(form.return_to === undefined ? '/signin' : signInUrl(localReturnPath(form.return_to)), 303);
  });
}
