import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { Deps } from '../../deps.js';
import { approveAuthorization, AUTHORIZE_PATH, decideAuthorization, errorRedirect, type AuthorizeOutcome } from '../../oauth/authorize/decision.js';
import { checkAuthorizationRequest, type AuthorizationRequest, type AuthorizeParameters } from '../../oauth/authorize/request.js';
import { PageError } from '../../oauth/errors.js';
import { parsePageForm } from '../form.js';
import { translatorFor } from '../page-language.js';
import { pageCspAllowingFormsTo } from '../plugins/security-headers.js';
import { renderPage } from './render.js';
import { MAX_AUTHORIZE_RETURN_LENGTH, signInUrl } from './sign-in.js';

const text = z.string().optional();
const authorizeParameters = z.object({
  response_type: text,
  client_id: text,
  redirect_uri: text,
  scope: text,
  state: text,
  code_challenge: text,
  code_challenge_method: text,
  nonce: text,
  prompt: text,
  max_age: text,
  request: text,
  request_uri: text,
  dpop_jkt: text,
});
const decisionForm = authorizeParameters.extend({ action: z.enum(['allow', 'deny']) });

/** The parameters as the request gave them: zod's output has no undefined-valued keys of its own. */
function parametersOf(parsed: z.output<typeof authorizeParameters>): AuthorizeParameters {
  return Object.fromEntries(Object.entries(parsed).filter(([, value]) => value !== undefined));
}

/**
 * The request, checked: a problem with the app or its redirect URI is thrown as our own page (never
 * redirected); any other problem comes back as the error redirect to send to the app.
 */
async function checked(deps: Deps, parameters: AuthorizeParameters): Promise<AuthorizationRequest | AuthorizeOutcome> {
  const result = await checkAuthorizationRequest(deps.clients, parameters);
  if (result.kind === 'shown_error') throw new PageError(400, 'authorize.error_title', result.messageKey);
  if (result.kind === 'redirect_error') return errorRedirect(deps, result, result.error, result.description);
  return result.request;
}

function isOutcome(value: AuthorizationRequest | AuthorizeOutcome): value is AuthorizeOutcome {
  return 'kind' in value;
}

function answer(request: FastifyRequest, reply: FastifyReply, authorization: AuthorizationRequest | null, outcome: AuthorizeOutcome, deps: Deps) {
  if (outcome.kind === 'redirect') return reply.redirect(outcome.location, 303);
  if (outcome.kind === 'sign_in') {
    // The way back must survive the sign-in page's own bound; a request too long for it is refused, not cut.
    if (outcome.returnTo.length > MAX_AUTHORIZE_RETURN_LENGTH && authorization) {
      return answer(request, reply, authorization, errorRedirect(deps, authorization, 'invalid_request', 'the request is too long'), deps);
    }
    return reply.redirect(signInUrl(outcome.returnTo, { again: outcome.again }), 303);
  }
  if (!authorization) throw new Error('a consent page needs its request');
  const i18n = translatorFor(request);
  const client = authorization.client;
  // The answer to this form is a redirect to the app: the page's form-action must allow its origin.
  reply.header('Content-Security-Policy', pageCspAllowingFormsTo(authorization.redirectUri));
  return renderPage(request, reply, 'authorize/consent.eta', {
    title: i18n.t('authorize.title', { app: client.name }),
    appName: client.name,
    scopes: authorization.scopes,
    returnsTo: new URL(authorization.redirectUri).host,
    action: `${AUTHORIZE_PATH}/decision`,
    parameters: Object.entries(authorization.parameters),
  });
}

/**
 * The authorization endpoint (OAuth 2.1 §4.1.1) and the consent form's answer. Both are pages: a
 * browser comes here, and every problem is either shown to its user or sent back to the app.
 */
export function authorizeRoutes(app: FastifyInstance, deps: Deps): void {
  app.get(AUTHORIZE_PATH, async (request, reply) => {
    const parameters = parametersOf(parsePageForm(authorizeParameters, request.query));
    const result = await checked(deps, parameters);
    if (isOutcome(result)) return answer(request, reply, null, result, deps);
    const outcome = await decideAuthorization(deps, result, request.session?.user ?? null, request.ip);
    return answer(request, reply, result, outcome, deps);
  });

  app.post(`${AUTHORIZE_PATH}/decision`, async (request, reply) => {
    const form = parsePageForm(decisionForm, request.body);
    const { action, ...rest } = form;
    const parameters = parametersOf(rest);
    const result = await checked(deps, parameters);
    if (isOutcome(result)) return answer(request, reply, null, result, deps);
    const user = request.session?.user ?? null;
    // Signed out in another tab since the page was shown: sign in, then see the question again.
    if (!user) return answer(request, reply, result, await decideAuthorization(deps, result, null, request.ip), deps);
    if (action === 'deny') return answer(request, reply, result, errorRedirect(deps, result, 'access_denied', 'the user denied the request'), deps);
    return answer(request, reply, result, await approveAuthorization(deps, result, user, request.ip), deps);
  });
}
