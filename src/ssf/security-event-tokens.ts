import { SignJWT } from 'jose';
import type { CommittedEvent } from '../events/committed-events.js';
import { ID_TOKEN_ALG, type KeyRing } from '../keys/signing-keys.js';
import { epochSeconds } from '../lib/clock.js';
import { SET_EVENT_TYPES } from './vocabulary.js';

/**
 * What a SET says of an event of our log (CAEP 1.0, RISC 1.0), and its signature (RFC 8417, SSF
 * 1.0 §4.1: explicitly typed secevent+jwt, no sub, no exp).
 */

/** A SET's event: its type URI, its claims, and the session it is about (a grant), if one. */
export interface SetEvent {
  type: string;
  claims: Record<string, unknown>;
  sessionId: string | null;
}

type InitiatingEntity = 'admin' | 'user' | 'policy' | 'system';

/**
 * Why a grant ended (oauth/grant-revocation.ts, and the deletions of users and apps), as CAEP's
 * initiating_entity and reason_admin, which the interoperability profile requires non-empty.
 */
const REVOCATIONS: Record<string, { entity: InitiatingEntity; reason: string }> = {
  signed_out_by_user: { entity: 'user', reason: 'The user signed the device out on the Devices page' },
  access_removed: { entity: 'user', reason: "The user removed the app's access on the Connected apps page" },
  revoked_by_app: { entity: 'user', reason: 'The app revoked the grant (RFC 7009)' },
  reuse_detected: { entity: 'policy', reason: 'A refresh token was used again after it was replaced; the grant was revoked for safety' },
  code_replayed: { entity: 'policy', reason: 'An authorization code was redeemed twice; what it issued was revoked' },
  user_banned: { entity: 'admin', reason: 'The user was banned' },
  operator_revoked: { entity: 'admin', reason: "An operator revoked the grant (the admin API's bulk revocation)" },
  user_deleted: { entity: 'admin', reason: 'The user was deleted' },
  app_deleted: { entity: 'admin', reason: 'The app was deleted' },
};

/** An operator's change names its actor, as does the server's own; a user's own change names none (events/event-log.ts). */
function initiatedBy(event: CommittedEvent): InitiatingEntity {
  const kind = event.actor !== null && typeof event.actor === 'object' ? (event.actor as { kind?: unknown }).kind : null;
  if (kind === 'admin') return 'admin';
  return kind === 'server' ? 'system' : 'user';
}

/** The SET event an event of the log becomes, or null: not every fact is a Shared Signal. */
export function setEventOf(event: CommittedEvent): SetEvent | null {
  const timestamp = epochSeconds(event.created_at);
  switch (event.type) {
    case 'grant.revoked': {
      if (event.grant_id === null) return null;
      const why = REVOCATIONS[event.reason ?? ''] ?? { entity: 'system', reason: `The grant was revoked (${event.reason ?? 'no reason recorded'})` };
      return {
        type: SET_EVENT_TYPES.sessionRevoked,
        claims: { event_timestamp: timestamp, initiating_entity: why.entity, reason_admin: { en: why.reason } },
        sessionId: event.grant_id,
      };
    }
    case 'user.password_changed': {
      const entity = initiatedBy(event);
      return {
        type: SET_EVENT_TYPES.credentialChange,
        claims: {
          credential_type: 'password',
          change_type: 'update',
          event_timestamp: timestamp,
          initiating_entity: entity,
          reason_admin: { en: entity === 'admin' ? "An operator set the user's password" : 'The user changed their password' },
        },
        sessionId: null,
      };
    }
    case 'user.banned':
      return { type: SET_EVENT_TYPES.accountDisabled, claims: {}, sessionId: null };
    case 'user.unbanned':
      return { type: SET_EVENT_TYPES.accountEnabled, claims: {}, sessionId: null };
    case 'user.deleted':
      return { type: SET_EVENT_TYPES.accountPurged, claims: {}, sessionId: null };
    default:
      return null;
  }
}

/** The claims of one SET (RFC 8417 §2.2): `iat` when it was made, `txn` the event it tells of. */
export function setClaims(input: {
  issuer: string;
  jti: string;
  audience: string;
  issuedAt: Date;
  eventId: string | null;
  subject: Record<string, unknown>;
  event: { type: string; claims: Record<string, unknown> };
}): Record<string, unknown> {
  return {
    iss: input.issuer,
    jti: input.jti,
    iat: epochSeconds(input.issuedAt),
    aud: input.audience,
    ...(input.eventId !== null && { txn: input.eventId }),
    sub_id: input.subject,
    events: { [input.event.type]: input.event.claims },
  };
}

/**
 * Signs a SET with the key that signs now (published in the JWKS), when it is delivered: its
 * claims, and so its jti, are the same on every delivery of it; only the signature may differ.
 */
export async function signSet(keys: Pick<KeyRing, 'signingKey'>, now: Date, claims: Record<string, unknown>): Promise<string> {
  const key = keys.signingKey(now);
  return new SignJWT(claims).setProtectedHeader({ alg: ID_TOKEN_ALG, kid: key.kid, typ: 'secevent+jwt' }).sign(key.privateKey);
}
