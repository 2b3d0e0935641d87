import { z } from 'zod';
import type { Deps } from '../../deps.js';
import { addSeconds } from '../../lib/clock.js';
import { rotateRefreshToken } from '../../repositories/refresh-tokens.js';
import { revokeAndCountGrants } from '../grant-revocation.js';
import { DISABLED_APP, refuseIfDisabled, type Client } from '../client-auth.js';
import { invalidClient, invalidGrant, invalidScope } from '../errors.js';
import { signIdToken } from '../id-token.js';
import { REFRESH_TOKEN_GRANT } from '../metadata.js';
import { narrowedScopes, parseScope } from '../scopes.js';
import { toTokenResponse, type TokenResponse } from '../token-response.js';
import { hashOpaque, mintOpaque, TOKEN_PREFIX } from '../tokens.js';
import type { GrantContext } from './types.js';

export const grantType = REFRESH_TOKEN_GRANT;

export const parameters = z.object({
  refresh_token: z.string().min(1),
  scope: z.string().optional(),
});

const UNKNOWN = 'the refresh token is invalid, expired or revoked';

/**
 * RFC 6749 §6 with rotation (RFC 9700 §4.14.2): every refresh replaces the presented token, and
 * a replaced token presented again means two parties hold the grant, so the whole grant is
 * revoked. The rotation is one SQL statement (see rotateRefreshToken); the only other database
 * work is on failure paths.
 *
 * Two refreshes racing with the same token: the database serialises them on the token's row, so
 * exactly one rotates. The loser cannot be told apart from a replay of a stolen token (it too
 * presents a token that has just been replaced), so it gets invalid_grant and the grant is
 * revoked, the winner's brand-new tokens included. A client must not refresh concurrently; one
 * that does signs its user out of that device, and never ends up with two live successors.
 */
export async function handle(deps: Deps, client: Client, form: z.output<typeof parameters>, context: GrantContext): Promise<TokenResponse> {
  const scope = parseScope(form.scope);
  const requested = scope && scope.length > 0 ? scope : null;
  // Not a token we issue: spare the database.
  if (!form.refresh_token.startsWith(TOKEN_PREFIX.refreshToken) || form.refresh_token.length > 256) {
    await refuseIfDisabled(deps.clients, client);
    throw invalidGrant(UNKNOWN);
  }

  const now = deps.clock.now();
  const refresh = mintOpaque(TOKEN_PREFIX.refreshToken);
  const access = mintOpaque(TOKEN_PREFIX.accessToken);
  const outcome = await rotateRefreshToken(deps.db, {
    presentedHash: hashOpaque(form.refresh_token),
    clientId: client.clientId,
    scopes: requested,
    refreshHash: refresh.hash,
    refreshExpiresAt: addSeconds(now, deps.config.refreshTokenTtl),
    accessHash: access.hash,
    accessExpiresAt: addSeconds(now, deps.config.accessTokenTtl),
    ip: context.ip,
    now,
  });

  // Another client's token looks unknown and is left alone: the caller proved nothing about it.
  if (!outcome || outcome.client_id !== client.clientId) {
    await refuseIfDisabled(deps.clients, client);
    throw invalidGrant(UNKNOWN);
  }
  if (outcome.client_disabled) throw invalidClient(DISABLED_APP);
  if (!outcome.rotated) {
    if (!outcome.live) throw invalidGrant(UNKNOWN);
    if (outcome.replaced) return revokeReusedGrant(deps, outcome, context);
    if (outcome.expired) throw invalidGrant('the refresh token has expired; sign the device in again');
    if (!outcome.scope_ok) {
      // RFC 6749 §6: the scope may narrow what was granted, never widen it.
      narrowedScopes(requested ?? undefined, outcome.scopes);
      throw invalidScope('scope exceeds what was granted');
    }
    // Current, live and in scope, yet not rotated: a concurrent refresh replaced it first.
    return revokeReusedGrant(deps, outcome, context);
  }

  const scopes = requested ?? outcome.scopes;
  // After commit, so a failure here would lose the rotation; signing with the in-memory key does
  // not fail on any state of ours, and signing first would need the user, one more round trip.
  const idToken = scopes.includes('openid')
    ? await signIdToken(
        deps,
        client.clientId,
        { userId: outcome.user_id, email: outcome.email, name: outcome.name, authTime: outcome.auth_time },
        scopes,
      )
    : null;
  return toTokenResponse({
    accessToken: access.value,
    expiresIn: deps.config.accessTokenTtl,
    refreshToken: refresh.value,
    scopes,
    idToken,
  });
}

/** Committed before invalid_grant goes out: a throw inside a transaction would roll it back. */
async function revokeReusedGrant(deps: Deps, outcome: { grant_id: string }, context: GrantContext): Promise<never> {
  await revokeAndCountGrants(deps, { grantId: outcome.grant_id }, 'reuse_detected', context.ip);
  throw invalidGrant('the refresh token was already used; the grant has been revoked for safety');
}
