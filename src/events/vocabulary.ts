/**
 * The one vocabulary of the event log (issue 32 §1): every fact an operator or a receiver needs,
 * named `subject.fact`. A webhook subscribes to these names; the Shared Signals transmitter maps
 * some of them to CAEP and RISC events. Add a name here before writing it anywhere.
 */
export const EVENT_TYPES = [
  // The device flow (RFC 8628).
  'device_request.created',
  'device_request.approved',
  'device_request.denied',
  /** The user picked a wrong confirmation phrase: the request is over. */
  'device_request.cancelled',
  'device_request.expired',
  /** Refused by the operator's device policy (issue 31 §2), or by a proximity rule. */
  'device_request.refused',
  // Grants and their tokens.
  'grant.issued',
  'grant.rotated',
  /** A refresh retried within the retry window got its lost answer again. */
  'grant.retried',
  /** A device grant refreshed from another country or a hosting network (issue 27 §3). */
  'grant.refreshed_elsewhere',
  /** Ended before its time; `reason` says why (oauth/grant-revocation.ts). */
  'grant.revoked',
  // Sign-in on our pages.
  'session.signed_in',
  'session.sign_in_refused',
  'session.signed_out',
  // People.
  'user.created',
  'user.changed',
  'user.password_changed',
  'user.banned',
  'user.unbanned',
  'user.deleted',
  // Apps.
  'app.created',
  'app.changed',
  'app.disabled',
  'app.enabled',
  'app.secret_rotated',
  'app.deleted',
  // Keys and the operator's other settings.
  'signing_key.rotated',
  'signing_key.revoked',
  /** Every sealed value re-sealed under a new key-encryption key (`device-auth keys rewrap`, on the database). */
  'key_encryption_key.rewrapped',
  'device_policy.changed',
  'webhook.created',
  'webhook.changed',
  'webhook.deleted',
  'ssf_stream.created',
  'ssf_stream.changed',
  'ssf_stream.deleted',
] as const;

export type EventType = (typeof EVENT_TYPES)[number];

const KNOWN: ReadonlySet<string> = new Set(EVENT_TYPES);

export function isEventType(value: string): value is EventType {
  return KNOWN.has(value);
}
