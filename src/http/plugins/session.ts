import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Config } from '../../config.js';
import type { Deps } from '../../deps.js';
import { findAnonymousVisit, findSession, startAnonymousVisit, type BrowserSession } from '../../accounts/sessions.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** Loaded by registerSessions for page routes; null on a POST that came with neither a live session nor an anonymous cookie. */
    session: BrowserSession | null;
  }
}

/**
 * Over https the __Host- prefix makes browsers refuse the cookie unless it is Secure, host-only
 * and Path=/, so a sibling subdomain cannot plant a session id on us, nor an anonymous nonce
 * whose form token it learnt by visiting us itself (the weak spot of double submit).
 */
function sessionCookieName(config: Config): string {
  return config.secureCookies ? '__Host-da_session' : 'da_session';
}

function anonymousCookieName(config: Config): string {
  return config.secureCookies ? '__Host-da_anon' : 'da_anon';
}

const cookieAttributes = (config: Config) => ({ path: '/', httpOnly: true, sameSite: 'lax', secure: config.secureCookies }) as const;

export function setSessionCookie(reply: FastifyReply, config: Config, cookieValue: string): void {
  reply.setCookie(sessionCookieName(config), cookieValue, { ...cookieAttributes(config), maxAge: config.sessionTtl });
}

export function clearSessionCookie(reply: FastifyReply, config: Config): void {
  reply.clearCookie(sessionCookieName(config), cookieAttributes(config));
}

function setAnonymousCookie(reply: FastifyReply, config: Config, cookieValue: string): void {
  reply.setCookie(anonymousCookieName(config), cookieValue, { ...cookieAttributes(config), maxAge: config.sessionTtl });
}

export function clearAnonymousCookie(reply: FastifyReply, config: Config): void {
  reply.clearCookie(anonymousCookieName(config), cookieAttributes(config));
}

const isPageLoad = (request: FastifyRequest) => request.method === 'GET' || request.method === 'HEAD';

/**
 * Loads the browser of every page request into request.session: the session row its cookie
 * names, or else an anonymous visit, which costs no database write. A page load without a valid
 * anonymous cookie is given one, so the sign-in form has a CSRF token too; a POST never is, so a
 * forged POST finds nothing to ride on.
 */
export function registerSessions(app: FastifyInstance, deps: Deps): void {
  const { config } = deps;
  app.decorateRequest('session', null);
  app.addHook('preHandler', async (request, reply) => {
    const sessionCookie = request.cookies[sessionCookieName(config)];
    const stored = sessionCookie ? await findSession(deps, sessionCookie) : null;
    if (stored) {
      request.session = stored;
      return;
    }
    const pageLoad = isPageLoad(request);
    // A cookie naming no live session (expired, signed out elsewhere) goes, so that later page
    // loads do not look it up again.
    if (sessionCookie !== undefined && pageLoad) clearSessionCookie(reply, config);
    const anonymousCookie = request.cookies[anonymousCookieName(config)];
    let visit = anonymousCookie ? findAnonymousVisit(deps, anonymousCookie) : null;
    if (!visit && pageLoad) {
      const started = startAnonymousVisit(deps);
      setAnonymousCookie(reply, config, started.cookieValue);
      visit = started.visit;
    }
    request.session = visit;
  });
}

/** What the layout needs on every page. */
export function layoutModel(request: FastifyRequest): { signedIn: boolean; signedInAs: string | null; csrfToken: string } {
  const user = request.session?.user;
  return { signedIn: Boolean(user), signedInAs: user?.email ?? null, csrfToken: request.session?.csrfToken ?? '' };
}
