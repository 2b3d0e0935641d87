/**
 * The names the Shared Signals transmitter speaks (issue 32 §3): delivery methods (SSF 1.0 §6),
 * the event types it sends (CAEP 1.0, RISC 1.0, SSF 1.0 §8.1.4 and §8.1.5), the subject formats
 * a stream may ask for (RFC 9493), and where its endpoints are.
 */

/** The event log's consumer that fans events out into SETs (events/committed-events.ts). */
export const SSF_CONSUMER = 'ssf';

/** RFC 8935 push: we POST each SET to the receiver's endpoint_url. */
export const PUSH_DELIVERY = 'urn:ietf:rfc:8935';
/** RFC 8936 poll: the receiver POSTs to our endpoint for its SETs. */
export const POLL_DELIVERY = 'urn:ietf:rfc:8936';

export const DELIVERY_METHODS = [PUSH_DELIVERY, POLL_DELIVERY] as const;

const CAEP = 'https://schemas.openid.net/secevent/caep/event-type';
const RISC = 'https://schemas.openid.net/secevent/risc/event-type';
const SSF = 'https://schemas.openid.net/secevent/ssf/event-type';

export const SET_EVENT_TYPES = {
  sessionRevoked: `${CAEP}/session-revoked`,
  credentialChange: `${CAEP}/credential-change`,
  accountDisabled: `${RISC}/account-disabled`,
  accountEnabled: `${RISC}/account-enabled`,
  accountPurged: `${RISC}/account-purged`,
  /** Always sent when asked for, whatever the stream requested (SSF 1.0 §8.1.4). */
  verification: `${SSF}/verification`,
  /** Sent when the transmitter changes a stream's status on its own (SSF 1.0 §8.1.5), outside what a stream requests. */
  streamUpdated: `${SSF}/stream-updated`,
} as const;

/** What a receiver may request (events_supported): the verification event is outside it, always available. */
export const EVENTS_SUPPORTED: readonly string[] = [
  SET_EVENT_TYPES.sessionRevoked,
  SET_EVENT_TYPES.credentialChange,
  SET_EVENT_TYPES.accountDisabled,
  SET_EVENT_TYPES.accountEnabled,
  SET_EVENT_TYPES.accountPurged,
];

/** The events a stream delivers: those requested that we support, or all we support if it requested none. */
export function eventsDelivered(requested: readonly string[] | null): string[] {
  return requested === null ? [...EVENTS_SUPPORTED] : EVENTS_SUPPORTED.filter((type) => requested.includes(type));
}

/**
 * How a stream's SETs name their subject (the stream's `format`): the user as iss_sub (the
 * default; `sub` as in our ID tokens), by email, or opaque (the same `sub`, without `iss`); or
 * complex, the user as iss_sub with the session beside it when a SET is about one grant.
 */
export const SUBJECT_FORMATS = ['iss_sub', 'email', 'opaque', 'complex'] as const;

export const SSF_PATHS = {
  configuration: '/ssf/stream',
  status: '/ssf/status',
  addSubject: '/ssf/subjects/add',
  removeSubject: '/ssf/subjects/remove',
  verification: '/ssf/verify',
  /** Followed by the stream id: one poll endpoint per stream (SSF 1.0 §6.1.2). */
  poll: '/ssf/poll',
} as const;

/** A receiver may ask for a verification event this often (SSF 1.0 §8.1.1 min_verification_interval). */
export const MIN_VERIFICATION_INTERVAL_SECONDS = 30;

/** Read the configuration and status with ssf.read; everything else needs ssf.manage (the CAEP interoperability profile). */
export const SCOPE_TO_READ = 'ssf.read';
export const SCOPE_TO_MANAGE = 'ssf.manage';
