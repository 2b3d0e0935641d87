import type { MessageKey } from '../i18n/catalogues.js';
import type { Deps } from '../deps.js';
import { publicView, type Client } from './client-auth.js';
import { verifyIdTokenHint } from './id-token.js';
import { redirectWith } from './authorize/request.js';

export { END_SESSION_PATH } from './metadata.js';

/** OpenID Connect RP-Initiated Logout 1.0 §2: the request's parameters, as they arrived (query or form). */
export interface EndSessionParameters {
  id_token_hint?: string | undefined;
  client_id?: string | undefined;
  post_logout_redirect_uri?: string | undefined;
  state?: string | undefined;
  ui_locales?: string | undefined;
}

/** The parameters carried from the confirmation page to its answer, in this order. */
export const END_SESSION_PARAMETER_NAMES = ['id_token_hint', 'client_id', 'post_logout_redirect_uri', 'state', 'ui_locales'] as const satisfies ReadonlyArray<
  keyof EndSessionParameters
>;

/** A request whose every part checked out. */
export interface EndSessionRequest {
  /** The app that sent the browser here, from the hint or client_id; null when neither says. */
  client: Client | null;
  /** The user the hint names (its sub); null without a hint. */
  hintSubject: string | null;
  /** Registered by `client`, compared exactly; null: show our own "signed out" page. */
  postLogoutRedirectUri: string | null;
  state: string | null;
  parameters: EndSessionParameters;
}

export type CheckedEndSession = { kind: 'valid'; request: EndSessionRequest } | { kind: 'shown_error'; messageKey: MessageKey };

/**
 * RP-Initiated Logout 1.0 §2-§3. The app is named by the hint's audience, by client_id, or both
 * (then they must agree); mod_auth_openidc sends only id_token_hint and post_logout_redirect_uri,
 * so the hint alone is enough. A post_logout_redirect_uri is followed only when that app
 * registered it exactly (§3.1); anything wrong is shown on our page and nobody is redirected, so
 * the endpoint is never an open redirector. The hint is only a statement of who signed in: the
 * caller decides whether it matches the browser's user.
 */
export async function checkEndSessionRequest(deps: Pick<Deps, 'keys' | 'config' | 'clients'>, parameters: EndSessionParameters): Promise<CheckedEndSession> {
  const shown = (messageKey: MessageKey): CheckedEndSession => ({ kind: 'shown_error', messageKey });
  let hintSubject: string | null = null;
  let clientId = parameters.client_id ?? null;
  if (parameters.id_token_hint !== undefined) {
    const hint = await verifyIdTokenHint(deps, parameters.id_token_hint);
    if (!hint) return shown('end_session.bad_hint');
    // §2: when both are given, client_id must be the hint's audience.
    if (clientId !== null && clientId !== hint.clientId) return shown('end_session.app_mismatch');
    hintSubject = hint.subject;
    clientId = hint.clientId;
  }
  let client: Client | null = null;
  if (clientId !== null) {
    // find() refuses a client_id that is not printable ASCII without a query.
    const found = await deps.clients.find(clientId);
    if (!found || found.disabled) return shown('end_session.unknown_app');
    client = publicView(found);
  }
  const postLogoutRedirectUri = parameters.post_logout_redirect_uri ?? null;
  if (postLogoutRedirectUri !== null) {
    // §3.1: without knowing the app, the address cannot be checked against its registration.
    if (client === null) return shown('end_session.redirect_needs_app');
    if (!client.postLogoutRedirectUris.includes(postLogoutRedirectUri)) return shown('end_session.unregistered_redirect');
  }
  return { kind: 'valid', request: { client, hintSubject, postLogoutRedirectUri, state: parameters.state ?? null, parameters } };
}

/** §3: back to the app's registered address, with its state unchanged; null when it gave none. */
export function postLogoutLocation(request: EndSessionRequest): string | null {
  return request.postLogoutRedirectUri === null ? null : redirectWith(request.postLogoutRedirectUri, { state: request.state });
}
