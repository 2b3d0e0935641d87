import type { Transaction } from 'kysely';
import type { DB } from '../db/schema.js';
import type { Deps } from '../deps.js';
import { addSeconds } from '../lib/clock.js';
import { recordEvents } from '../events/event-log.js';
import { insertAccessToken, insertGrant, insertRefreshToken } from '../repositories/grants.js';
import { insertAppAccessToken } from '../repositories/app-access-tokens.js';
import { refreshRotation, retryRotation, type RotationOutcome } from '../repositories/refresh-tokens.js';
import { rotationRules } from './grant-types/refresh-token.rules.js';
import { DISABLED_APP, type Client } from './client-auth.js';
import { invalidClient } from './errors.js';
import type { GrantOrigin } from './grant-origin.js';
import { signIdToken } from './id-token.js';
import { REFRESH_TOKEN_GRANT } from './metadata.js';
import { toTokenResponse, type TokenResponse } from './token-response.js';
import { deriveOpaque, hashOpaque, mintOpaque, TOKEN_PREFIX, type MintedSecret } from './opaque-tokens.js';

/**
 * The one place tokens are made. A grant type decides whether tokens are issued and for what
 * (user, app, scopes, auth_time, the device if any); this module mints and stores the access and
 * refresh tokens, creates or rotates the grant, records the event and signs the ID token. No
 * grant type writes a token row itself.
 */

/** Refresh tokens go to the apps registered for the refresh_token grant (RFC 7591 §2). */
export function receivesRefreshTokens(client: Pick<Client, 'grantTypes'>): boolean {
  return client.grantTypes.includes(REFRESH_TOKEN_GRANT);
}

/** What the device said of itself, for a grant made by the device flow (where it was is in the origin). */
export interface DeviceDetails {
  platformName: string | null;
  platformDescription: string | null;
  platformIcon: string | null;
  platformIconSha256: Uint8Array | null;
  /** What the redeeming poll's check came to (proximity.ts assessRedeemer); its place is the origin's redeemer. */
  redeemer: { action: 'allow' | 'warn'; signals: string[] };
}

/** A grant type's decision: tokens for this user and app, with these scopes. */
export interface GrantDecision {
  client: Client;
  user: { userId: string; email: string; name: string | null };
  scopes: string[];
  /** When the user proved who they are (the ID token's auth_time). */
  authTime: Date;
  /** OIDC Core §3.1.2.1: the authorization request's nonce, carried into the ID token. */
  nonce: string | null;
  withRefreshToken: boolean;
  device: DeviceDetails | null;
  /** Where the grant came from, kept on it for life (issue 31 §1). */
  origin: GrantOrigin;
  /** Recorded with the grant's "issued" event. */
  issuedBy: { reason: 'device_code' | 'authorization_code'; ip: string; details: string | null };
  /** RFC 9449: the key the grant and its tokens are bound to, for life; null for Bearer tokens. */
  dpopJkt: string | null;
  now: Date;
}

/** The origin as the grants table stores it: one statement with the grant, no round trip of its own. */
function originColumns(origin: GrantOrigin) {
  const { requester, approver, redeemer } = origin;
  return {
    approved_at: origin.approvedAt,
    signed_in_ip: requester?.address ?? null,
    requester_asn: requester?.asn ?? null,
    requester_network: requester?.network ?? null,
    requester_country: requester?.country ?? null,
    requester_hosting: requester?.hosting ?? null,
    approver_ip: approver?.address ?? null,
    approver_asn: approver?.asn ?? null,
    approver_network: approver?.network ?? null,
    approver_country: approver?.country ?? null,
    approver_hosting: approver?.hosting ?? null,
    redeemer_ip: redeemer?.address ?? null,
    redeemer_asn: redeemer?.asn ?? null,
    redeemer_network: redeemer?.network ?? null,
    redeemer_country: redeemer?.country ?? null,
    redeemer_hosting: redeemer?.hosting ?? null,
    approval_signals: origin.approvalSignals,
    decision: origin.decision,
    decision_confirmed: origin.confirmed,
  };
}

export interface IssuedGrant {
  grantId: string;
  response: TokenResponse;
}

/**
 * A new grant with its first tokens, in the caller's transaction (which also holds whatever made
 * the decision once-only: a redeemed device request, a redeemed code). The ID token is signed
 * before the commit: if signing failed, the redemption would roll back rather than be lost.
 */
export async function issueNewGrant(trx: Transaction<DB>, deps: Deps, decision: GrantDecision): Promise<IssuedGrant> {
  const { client, user, scopes, now, device } = decision;
  const access = mintOpaque(TOKEN_PREFIX.accessToken);
  const refresh = decision.withRefreshToken ? mintOpaque(TOKEN_PREFIX.refreshToken) : null;
  const grantId = await insertGrant(trx, {
    user_id: user.userId,
    client_id: client.clientId,
    scopes,
    platform_name: device?.platformName ?? null,
    platform_description: device?.platformDescription ?? null,
    platform_icon: device?.platformIcon ?? null,
    platform_icon_sha256: device?.platformIconSha256 ?? null,
    auth_time: decision.authTime,
    created_at: now,
    last_used_at: now,
    // Device flow: where the device asked; code flow: where the user signed in, never the web
    // app's server, whose address the token request (last_used_ip) carries.
    ...originColumns(decision.origin),
    grant_type: decision.issuedBy.reason,
    ...(device && { redeemer_action: device.redeemer.action, redeemer_signals: device.redeemer.signals }),
    last_used_ip: decision.issuedBy.ip,
    // A grant without refresh tokens ends with its access token.
    expires_at: addSeconds(now, refresh ? deps.config.refreshTokenTtl : deps.config.accessTokenTtl),
    current_refresh_hash: refresh?.hash ?? null,
    dpop_jkt: decision.dpopJkt,
  });
  await insertAccessToken(trx, {
    token_hash: access.hash,
    grant_id: grantId,
    user_id: user.userId,
    client_id: client.clientId,
    scopes,
    created_at: now,
    expires_at: addSeconds(now, deps.config.accessTokenTtl),
    dpop_jkt: decision.dpopJkt,
  });
  if (refresh) {
    await insertRefreshToken(trx, { token_hash: refresh.hash, grant_id: grantId, created_at: now, expires_at: addSeconds(now, deps.config.refreshTokenTtl) });
  }
  await recordEvents(trx, [
    {
      grant_id: grantId,
      user_id: user.userId,
      client_id: client.clientId,
      type: 'grant.issued',
      reason: decision.issuedBy.reason,
      client_ip: decision.issuedBy.ip,
      created_at: now,
      data: decision.issuedBy.details,
    },
  ]);
  const idToken = scopes.includes('openid')
    ? await signIdToken(
        deps,
        client.clientId,
        { userId: user.userId, email: user.email, name: user.name, authTime: decision.authTime, grantId },
        scopes,
        decision.nonce,
      )
    : null;
  return {
    grantId,
    response: toTokenResponse({
      accessToken: access.value,
      expiresIn: deps.config.accessTokenTtl,
      refreshToken: refresh?.value ?? null,
      scopes,
      idToken,
      dpopJkt: decision.dpopJkt,
    }),
  };
}

/** The rotation's one statement, under the refresh grant's rules (compiled on first use). */
const rotateRefreshToken = refreshRotation(rotationRules);

export type Rotation =
  | { kind: 'rotated'; response: TokenResponse; outcome: RotationOutcome }
  /** The token as found, not rotated: the refresh grant type says why. */
  | { kind: 'not_rotated'; outcome: RotationOutcome }
  /** Not a token of this app (or none at all). */
  | { kind: 'unknown' };

/**
 * The tokens that replace a refresh token, computed from it under the server's retry key rather
 * than drawn at random: a retry of a refresh whose answer was lost can be given the very same
 * tokens again, while the database keeps only their hashes and nobody without the presented token
 * can compute them.
 */
function successorsOf(deps: Deps, presentedToken: string): { refresh: MintedSecret; access: MintedSecret } {
  const key = deps.secrets.refreshRetryKey;
  return {
    refresh: deriveOpaque(TOKEN_PREFIX.refreshToken, key, 'successor refresh token', presentedToken),
    access: deriveOpaque(TOKEN_PREFIX.accessToken, key, 'successor access token', presentedToken),
  };
}

/**
 * RFC 6749 §6 with rotation (RFC 9700 §4.14.2): replaces the presented refresh token and adds an
 * access token, in one SQL statement (rotateRefreshToken), then signs the ID token. The signing
 * comes after the commit, so a failure there would lose the rotation; signing with the in-memory
 * key does not fail on any state of ours, and signing first would need the user, one more round trip.
 */
export async function rotateGrantTokens(
  deps: Deps,
  input: {
    client: Client;
    presentedToken: string;
    requestedScopes: string[] | null;
    ip: string;
    /** The key of the request's DPoP proof, if it had one: a bound grant rotates only with its own key. */
    dpopJkt: string | null;
  },
): Promise<Rotation> {
  const now = deps.clock.now();
  const { refresh, access } = successorsOf(deps, input.presentedToken);
  const outcome = await rotateRefreshToken(deps.db, {
    presentedHash: hashOpaque(input.presentedToken),
    clientId: input.client.clientId,
    scopes: input.requestedScopes,
    refreshHash: refresh.hash,
    refreshExpiresAt: addSeconds(now, deps.config.refreshTokenTtl),
    accessHash: access.hash,
    accessExpiresAt: addSeconds(now, deps.config.accessTokenTtl),
    ip: input.ip,
    dpopJkt: input.dpopJkt,
    now,
  });
  // Another app's token looks unknown and is left alone: the caller proved nothing about it.
  if (!outcome || outcome.client_id !== input.client.clientId) return { kind: 'unknown' };
  if (!outcome.rotated) return { kind: 'not_rotated', outcome };
  const scopes = input.requestedScopes ?? outcome.scopes;
  const idToken = await refreshedIdToken(deps, input.client, outcome, scopes);
  return {
    kind: 'rotated',
    outcome,
    response: toTokenResponse({
      accessToken: access.value,
      expiresIn: deps.config.accessTokenTtl,
      refreshToken: refresh.value,
      scopes,
      idToken,
      dpopJkt: input.dpopJkt,
    }),
  };
}

/**
 * A refresh token presented again after it was replaced, judged a retry of a refresh whose answer
 * was lost: within REFRESH_RETRY_WINDOW seconds of the rotation, and only while its successor has
 * not been used, the answer is the lost one again (the same refresh and access tokens; the ID
 * token is signed anew, and expires_in counts what is left of the access token's life). null when
 * it is not a retry: the caller treats it as reuse.
 */
export async function retryGrantTokens(
  deps: Deps,
  input: { client: Client; presentedToken: string; outcome: RotationOutcome; ip: string },
): Promise<TokenResponse | null> {
  const window = deps.config.refreshRetryWindow;
  if (window === 0) return null;
  const now = deps.clock.now();
  const { refresh, access } = successorsOf(deps, input.presentedToken);
  const answer = await retryRotation(deps.db, {
    grantId: input.outcome.grant_id,
    clientId: input.client.clientId,
    successorHash: refresh.hash,
    accessHash: access.hash,
    rotatedAfter: addSeconds(now, -window),
    ip: input.ip,
    now,
  });
  if (!answer) return null;
  const idToken = await refreshedIdToken(deps, input.client, input.outcome, answer.scopes);
  const expiresIn = Math.max(0, Math.floor((answer.access_expires_at.getTime() - now.getTime()) / 1000));
  // The same token_type as the lost answer: a bound grant's retry proved its key before it got here (key_ok).
  return toTokenResponse({ accessToken: access.value, expiresIn, refreshToken: refresh.value, scopes: answer.scopes, idToken, dpopJkt: answer.dpop_jkt });
}

/** OIDC Core §12.2: a refresh's ID token names the same user and auth_time as the grant's first. */
async function refreshedIdToken(deps: Deps, client: Client, grant: RotationOutcome, scopes: string[]): Promise<string | null> {
  if (!scopes.includes('openid')) return null;
  return signIdToken(
    deps,
    client.clientId,
    { userId: grant.user_id, email: grant.email, name: grant.name, authTime: grant.auth_time, grantId: grant.grant_id },
    scopes,
  );
}

/**
 * RFC 6749 §4.4.3: an access token the app holds for itself (the client_credentials grant), with
 * no user, no grant and no refresh token; bound to `dpopJkt` when the request proved a key
 * (RFC 9449 §5), else Bearer. It lives ACCESS_TOKEN_TTL. Its one statement refuses a disabled
 * app, which the token endpoint's cached lookup does not.
 */
export async function issueAppAccessToken(
  deps: Pick<Deps, 'db' | 'clock' | 'config'>,
  client: Client,
  scopes: string[],
  dpopJkt: string | null,
): Promise<TokenResponse> {
  const now = deps.clock.now();
  const access = mintOpaque(TOKEN_PREFIX.accessToken);
  const stored = await insertAppAccessToken(deps.db, {
    tokenHash: access.hash,
    clientId: client.clientId,
    scopes,
    createdAt: now,
    expiresAt: addSeconds(now, deps.config.accessTokenTtl),
    dpopJkt,
  });
  if (!stored) throw invalidClient(DISABLED_APP);
  return toTokenResponse({ accessToken: access.value, expiresIn: deps.config.accessTokenTtl, refreshToken: null, scopes, idToken: null, dpopJkt });
}
