import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { Deps } from '../../deps.js';
import { endBrowserSession, type EndSessionOutcome } from '../../accounts/end-session.js';
import { MAX_STATE_LENGTH } from '../../oauth/authorize/request.js';
import { CLIENT_ID_SYNTAX } from '../../oauth/client-auth.js';
import { checkEndSessionRequest, END_SESSION_PARAMETER_NAMES, END_SESSION_PATH, type EndSessionParameters } from '../../oauth/end-session.js';
import { PageError } from '../../oauth/errors.js';
import { storedText } from '../../lib/stored-text.js';
import { parsePageForm } from '../form.js';
import { translatorFor } from '../page-language.js';
import { clearSessionCookie } from '../plugins/session.js';
import { pageCspAllowingFormsTo } from '../plugins/security-headers.js';
import { MAX_URL_LENGTH } from '../plugins/strict-input.js';
import { renderPage } from './render.js';

/** BCP 47 tags, space-separated (OIDC Core §3.1.2.1 ui_locales); a few are plenty. */
const UI_LOCALES = /^[A-Za-z]{1,8}(-[A-Za-z0-9]{1,8})*( [A-Za-z]{1,8}(-[A-Za-z0-9]{1,8})*){0,9}$/;

// Bounded before anything is looked at: a huge state is a 400 page, never work. A hint over
// MAX_ID_TOKEN_HINT_LENGTH is refused by verifyIdTokenHint before any parsing, with the bad-hint page.
const endSessionParameters = z.object({
  id_token_hint: storedText.optional(),
  client_id: z.string().regex(CLIENT_ID_SYNTAX, 'not a client id').optional(),
  post_logout_redirect_uri: storedText.max(2000).optional(),
  state: storedText.max(MAX_STATE_LENGTH).optional(),
  // A value we cannot use is ignored, as OIDC Core §3.1.2.1 allows ("not an error").
  ui_locales: z
    .string()
    .optional()
    .transform((value) => (value !== undefined && value.length <= 200 && UI_LOCALES.test(value) ? value : undefined)),
});

function parametersOf(input: unknown): EndSessionParameters {
  const parsed = parsePageForm(endSessionParameters, input);
  return Object.fromEntries(Object.entries(parsed).filter(([, value]) => value !== undefined));
}

/**
 * ui_locales before the browser's own Accept-Language: the pages are negotiated from that header
 * alone, so the app's preference is put in front of it for this request.
 */
function preferUiLocales(request: FastifyRequest, parameters: EndSessionParameters): void {
  if (parameters.ui_locales === undefined) return;
  const browser = request.headers['accept-language'];
  request.headers['accept-language'] = [parameters.ui_locales.split(' ').join(', '), browser].filter(Boolean).join(', ');
}

async function endSession(deps: Deps, request: FastifyRequest, reply: FastifyReply, input: unknown, confirmed: boolean) {
  const parameters = parametersOf(input);
  preferUiLocales(request, parameters);
  const checked = await checkEndSessionRequest(deps, parameters);
  if (checked.kind === 'shown_error') throw new PageError(400, 'end_session.error_title', checked.messageKey);
  const outcome = await endBrowserSession(deps, request.session, checked.request, confirmed, request.ip);
  return answer(request, reply, deps, outcome);
}

function answer(request: FastifyRequest, reply: FastifyReply, deps: Deps, outcome: EndSessionOutcome) {
  const i18n = translatorFor(request);
  if (outcome.kind === 'confirm') {
    const { request: endSessionRequest } = outcome;
    // The answer to this form redirects to the app: the page's form-action must allow its origin.
    if (endSessionRequest.postLogoutRedirectUri !== null)
      reply.header('Content-Security-Policy', pageCspAllowingFormsTo(endSessionRequest.postLogoutRedirectUri));
    const parameters = END_SESSION_PARAMETER_NAMES.flatMap((name) => {
      const value = endSessionRequest.parameters[name];
      return value === undefined ? [] : [[name, value] as const];
    });
    return renderPage(request, reply, 'end-session/confirm.eta', {
      title: i18n.t('end_session.title'),
      appName: endSessionRequest.client?.name ?? null,
      action: `${END_SESSION_PATH}/confirm`,
      parameters,
    });
  }
  if (outcome.ended) {
    clearSessionCookie(reply, deps.config);
    // This page is drawn for nobody: the layout no longer says who is signed in.
    request.session = null;
  }
  if (outcome.location !== null) return reply.redirect(outcome.location, 303);
  return renderPage(request, reply, 'end-session/done.eta', { title: i18n.t('end_session.done_title') });
}

/**
 * OpenID Connect RP-Initiated Logout 1.0 §2: the end-session endpoint, by GET, and the
 * confirmation page's answer (a page form, so CSRF-checked). Registered among the pages.
 */
export function endSessionRoutes(pages: FastifyInstance, deps: Deps): void {
  pages.get(END_SESSION_PATH, async (request, reply) => endSession(deps, request, reply, request.query, false));
  pages.post(`${END_SESSION_PATH}/confirm`, async (request, reply) => endSession(deps, request, reply, request.body, true));
}

/**
 * §2: the endpoint also takes POST (form serialisation). An app's form posts cross-site, so the
 * browser sends no SameSite=Lax session cookie with it, and it carries no CSRF token of ours:
 * the request goes on as a GET of the same parameters, a top-level navigation that does carry the
 * cookie, and is handled exactly like one. Registered outside the pages: it reads no cookie.
 */
export function endSessionFormRoute(app: FastifyInstance): void {
  app.post(END_SESSION_PATH, async (request, reply) => {
    const parameters = parametersOf(request.body);
    const query = new URLSearchParams(Object.entries(parameters) as [string, string][]).toString();
    const location = query === '' ? END_SESSION_PATH : `${END_SESSION_PATH}?${query}`;
    if (location.length > MAX_URL_LENGTH) throw new PageError(400, 'error.bad_request', 'error.request_unreadable', { detail: 'the request is too long' });
    return reply.redirect(location, 303);
  });
}
