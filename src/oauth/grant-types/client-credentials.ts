import { z } from 'zod';
import type { Deps } from '../../deps.js';
import type { Client } from '../client-auth.js';
import { invalidScope, unauthorizedClient } from '../errors.js';
import { issueAppAccessToken } from '../issuance.js';
import { CLIENT_CREDENTIALS_GRANT } from '../metadata.js';
import { appScopes, grantableScopes, parseScope } from '../scopes.js';
import type { TokenResponse } from '../token-response.js';
import type { GrantContext } from './types.js';

export const grantType = CLIENT_CREDENTIALS_GRANT;

export const parameters = z.object({
  scope: z.string().max(1024).optional(),
});

/**
 * RFC 6749 §4.4: a confidential app asks for a token for itself, with no user (issue 32 §3: a
 * Shared Signals receiver managing its streams). Only the app's own scopes (ssf.manage, ssf.read)
 * can be asked for; none asked means all of them the app is allowed. A user's scope (openid, ...)
 * means nothing without a user, and is invalid_scope. With a DPoP proof the token is bound to
 * its key (RFC 9449 §5), which the Shared Signals endpoints then require (an app registered to use
 * DPoP sends one with every token request).
 */
export async function handle(deps: Deps, client: Client, form: z.output<typeof parameters>, context: GrantContext): Promise<TokenResponse> {
  // The registration (and a CHECK) keep public apps out; this says so should one get here.
  if (client.type !== 'confidential') throw unauthorizedClient('only a confidential app can use the client_credentials grant');
  const allowed = appScopes(client.allowedScopes);
  const scopes = grantableScopes(parseScope(form.scope), allowed);
  if (scopes.length === 0) throw invalidScope('this app is allowed none of the scopes an app holds for itself (ssf.manage, ssf.read)');
  // The app authenticated: its credential is what the proof was needed for (issue 28 §2).
  await context.spendProof();
  return issueAppAccessToken(deps, client, scopes, context.dpopJkt);
}
