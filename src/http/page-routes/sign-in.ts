import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { Deps } from '../../deps.js';
import { normaliseEmail } from '../../accounts/users.js';
import { failureLimitReached, recordFailures, waitText } from '../rate-limit.js';
import { signIn, signOut } from '../../accounts/sessions.js';
import { parsePageForm } from '../form.js';
import { clearSessionCookie, setSessionCookie } from '../plugins/session.js';
import { renderPage } from './render.js';

const DEFAULT_RETURN_PATH = '/activate';
const RETURN_PATHS = /^\/(activate|account)(\/|$)/;
const PARSE_BASE = 'http://return-to.invalid';

/**
 * Open-redirect defence: only a path on this server under /activate or /account; anything else
 * (an absolute URL, //host, /\host, ../ tricks) falls back to /activate. The value that reaches
 * the Location header is the URL parser's re-serialisation, never the raw input.
 */
export function localReturnPath(requested: string): string {
  let url: URL;
  try {
    url = new URL(requested, PARSE_BASE);
  } catch {
    return DEFAULT_RETURN_PATH;
  }
  if (url.origin !== PARSE_BASE || !RETURN_PATHS.test(url.pathname)) return DEFAULT_RETURN_PATH;
  return url.pathname + url.search;
}

export function signInUrl(returnTo: string): string {
  return `/signin?return_to=${encodeURIComponent(returnTo)}`;
}

const signInQuery = z.object({ return_to: z.string().default('') });
const signInForm = z.object({
  email: z.string().default(''),
  password: z.string().default(''),
  return_to: z.string().default(''),
});

const REFUSALS = {
  // One message for an unknown email and a wrong password: the page reveals no accounts.
  wrong_credentials: { status: 401, message: 'The email or password is incorrect.' },
  banned: { status: 403, message: 'This account has been suspended and cannot sign in. Contact the administrator if you think this is a mistake.' },
} as const;

export function signInRoutes(app: FastifyInstance, deps: Deps): void {
  app.get('/signin', async (request, reply) => {
    const returnTo = localReturnPath(parsePageForm(signInQuery, request.query).return_to);
    if (request.session?.user) return reply.redirect(returnTo, 303);
    return renderPage(request, reply, 'signin.eta', { title: 'Sign in', returnTo, email: '', message: null });
  });

  app.post('/signin', async (request, reply) => {
    const form = parsePageForm(signInForm, request.body);
    const returnTo = localReturnPath(form.return_to);
    // Failed attempts are limited per account (online guessing) and per address (spraying).
    const attemptLimits = [['signInPerAccount', normaliseEmail(form.email)], ['signInPerIp', request.ip]] as const;
    const limit = await failureLimitReached(deps, attemptLimits);
    if (limit.limited) {
      reply.header('Retry-After', String(limit.retryAfterSeconds));
      const message = `Too many failed sign-in attempts. Wait ${waitText(limit.retryAfterSeconds)}, then try again.`;
      return renderPage(request, reply, 'signin.eta', { title: 'Sign in', returnTo, email: form.email, message }, 429);
    }
    const result = await signIn(deps, request.session, form);
    if (result.kind === 'wrong_credentials') await recordFailures(deps, attemptLimits);
    if (result.kind === 'signed_in') {
      setSessionCookie(reply, deps.config, result.started.cookieValue);
      return reply.redirect(returnTo, 303);
    }
    const refusal = REFUSALS[result.kind];
    return renderPage(request, reply, 'signin.eta', { title: 'Sign in', returnTo, email: form.email, message: refusal.message }, refusal.status);
  });

  app.post('/signout', async (request, reply) => {
    if (request.session) await signOut(deps, request.session);
    clearSessionCookie(reply, deps.config);
    return reply.redirect('/signin', 303);
  });
}
