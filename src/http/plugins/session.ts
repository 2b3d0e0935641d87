import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Config } from '../../config.js';
import type { Deps } from '../../deps.js';
import { findSession, startAnonymousSession, type BrowserSession } from '../../accounts/sessions.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** Loaded by registerSessions for page routes; null on a POST that came without a live session. */
    session: BrowserSession | null;
  }
}

/**
 * Over https the __Host- prefix makes browsers refuse the cookie unless it is Secure, host-only
 * and Path=/, so a sibling subdomain cannot plant a session id on us.
 */
export function sessionCookieName(config: Config): string {
  return config.secureCookies ? '__Host-da_session' : 'da_session';
}

export function setSessionCookie(reply: FastifyReply, config: Config, cookieValue: string): void {
  reply.setCookie(sessionCookieName(config), cookieValue, {
    path: '/',
    httpOnly: true,
    sameSite: 'lax',
    secure: config.secureCookies,
    maxAge: config.sessionTtl,
  });
}

export function clearSessionCookie(reply: FastifyReply, config: Config): void {
  reply.clearCookie(sessionCookieName(config), { path: '/', httpOnly: true, sameSite: 'lax', secure: config.secureCookies });
}

const startsSession = (request: FastifyRequest) => request.method === 'GET' || request.method === 'HEAD';

/**
 * Loads the browser session of every page request into request.session. A GET without a live
 * session starts an anonymous one, so the sign-in form has a CSRF token too; a POST never does,
 * so a forged POST finds no session to ride on.
 */
export function registerSessions(app: FastifyInstance, deps: Deps): void {
  app.decorateRequest('session', null);
  app.addHook('preHandler', async (request, reply) => {
    const cookieValue = request.cookies[sessionCookieName(deps.config)];
    let session = cookieValue ? await findSession(deps, cookieValue) : null;
    if (!session && startsSession(request)) {
      const started = await startAnonymousSession(deps);
      setSessionCookie(reply, deps.config, started.cookieValue);
      session = started.session;
    }
    request.session = session;
  });
}

/** What the layout needs on every page. */
export function layoutModel(request: FastifyRequest): { signedIn: boolean; csrfToken: string } {
  return { signedIn: Boolean(request.session?.user), csrfToken: request.session?.csrfToken ?? '' };
}
