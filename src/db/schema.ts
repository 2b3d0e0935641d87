import type { ColumnType, Generated, Insertable } from 'kysely';

/** Timestamps are written and read as Date. */
type Timestamp = ColumnType<Date, Date, Date>;
type DefaultedTimestamp = ColumnType<Date, Date | undefined, Date>;

export type ClientKind = 'tv' | 'bot' | 'web';
export type ClientType = 'public' | 'confidential';
export type DeviceRequestStatus = 'pending' | 'approved' | 'denied' | 'redeemed';
/** policy: the operator's proximity policy refused the request (proximity.ts). */
export type DeniedReason = 'user_denied' | 'wrong_phrase' | 'user_banned' | 'policy' | 'redeemer_mismatch';

export interface ClientsTable {
  client_id: string;
  name: string;
  kind: ClientKind;
  type: ClientType;
  secret_hash: Uint8Array | null;
  /** The secret replaced by the last rotation, accepted until previous_secret_expires_at. */
  previous_secret_hash: Uint8Array | null;
  previous_secret_expires_at: Timestamp | null;
  allowed_scopes: string[];
  /** RFC 7662 §2.1: a resource server may introspect tokens. Only confidential web apps (a CHECK). */
  introspection_allowed: Generated<boolean>;
  /** RFC 7591 §2: the grant types it may use at the token endpoint (and the device endpoint); the refresh_token grant type means it gets refresh tokens. */
  grant_types: Generated<string[]>;
  /** Exact URLs the authorization endpoint may redirect to. */
  redirect_uris: Generated<string[]>;
  /** OpenID Connect RP-Initiated Logout 1.0: exact URLs the end-session endpoint may send a browser back to. */
  post_logout_redirect_uris: Generated<string[]>;
  /** RFC 9449 §5.2 dpop_bound_access_tokens: tokens only with a DPoP proof. */
  require_dpop: Generated<boolean>;
  /** Whether its devices show the confirmation phrase (stock RFC 8628 clients do not). */
  confirmation_phrase: Generated<boolean>;
  /** Issue 32 §3, the operator's switch: the app's Shared Signals streams tell of every user, not only its own users. */
  ssf_all_users: Generated<boolean>;
  created_at: DefaultedTimestamp;
  disabled_at: Timestamp | null;
}

export interface UsersTable {
  user_id: Generated<string>;
  email: string;
  password_hash: string;
  name: string | null;
  created_at: DefaultedTimestamp;
  banned_at: Timestamp | null;
}

export interface ServerSecretsTable {
  name: string;
  /** Clear, only from before the key-encryption key: sealed (and emptied) at the next start. */
  value: Uint8Array | null;
  /** AES-256-GCM under the key-encryption key (keys/sealing.ts). */
  sealed_value: Uint8Array | null;
  created_at: DefaultedTimestamp;
}

export interface SigningKeysTable {
  kid: string;
  alg: string;
  public_jwk: ColumnType<Record<string, unknown>, string, string>;
  /** Clear, only from before the key-encryption key: sealed (and emptied) at the next start. */
  private_jwk: ColumnType<Record<string, unknown> | null, string | null, string | null>;
  /** The private JWK, sealed under the key-encryption key; null once revoked. */
  private_key_sealed: Uint8Array | null;
  created_at: DefaultedTimestamp;
  /** When it starts signing; null: a next key, published but not scheduled yet. */
  activates_at: Timestamp | null;
  retired_at: Timestamp | null;
  revoked_at: Timestamp | null;
}

export interface BrowserSessionsTable {
  session_hash: Uint8Array;
  user_id: string | null;
  csrf_secret: string;
  created_at: Timestamp;
  expires_at: Timestamp;
  auth_time: Timestamp | null;
}

export interface GrantsTable {
  grant_id: Generated<string>;
  user_id: string;
  client_id: string;
  scopes: string[];
  platform_name: string | null;
  platform_description: string | null;
  platform_icon: string | null;
  /** The icon as the server fetched it (platform_icons), copied from the request at redemption. */
  platform_icon_sha256: Uint8Array | null;
  auth_time: Timestamp;
  created_at: Timestamp;
  last_used_at: Timestamp;
  expires_at: Timestamp;
  revoked_at: Timestamp | null;
  revoked_reason: string | null;
  /** The device's address when it asked for its code, and at its latest token request. */
  signed_in_ip: string | null;
  last_used_ip: string | null;
  /** SHA-256 of the grant's one current refresh token; null for grants without refresh tokens. */
  current_refresh_hash: Uint8Array | null;
  /** RFC 9449: the thumbprint of the key every refresh must prove; null for an unbound grant. */
  dpop_jkt: Generated<string | null>;
  /** Device flow only: where the approver was, which a later refresh is compared with (proximity.ts). */
  approver_ip: Generated<string | null>;
  /** Device flow only: where the tokens were collected from, and what its check came to (assessRedeemer). */
  redeemer_ip: Generated<string | null>;
  redeemer_action: Generated<'allow' | 'warn' | null>;
  redeemer_signals: Generated<string[] | null>;
  /** Issue 31 §1: how the grant was made and when its user agreed (the device flow's decision, the code flow's consent). */
  grant_type: GrantType;
  approved_at: Timestamp;
  /** Where each side was, located when the grant was issued (int8: pg gives text, hence the reads' Number()). */
  requester_asn: OriginAsn;
  requester_network: OriginText;
  requester_country: OriginText;
  requester_hosting: OriginFlag;
  approver_asn: OriginAsn;
  approver_network: OriginText;
  approver_country: OriginText;
  approver_hosting: OriginFlag;
  redeemer_asn: OriginAsn;
  redeemer_network: OriginText;
  redeemer_country: OriginText;
  redeemer_hosting: OriginFlag;
  /** Device flow only: what the approval page raised and decided, and whether the user ticked its box. */
  approval_signals: ColumnType<string[] | null, string[] | null | undefined, string[] | null>;
  decision: ColumnType<'allow' | 'warn' | 'confirm' | 'deny' | null, 'allow' | 'warn' | 'confirm' | 'deny' | null | undefined, never>;
  decision_confirmed: OriginFlag;
}

export type GrantType = 'device_code' | 'authorization_code';
type OriginAsn = ColumnType<string | number | null, number | null | undefined, never>;
type OriginText = ColumnType<string | null, string | null | undefined, never>;
type OriginFlag = ColumnType<boolean | null, boolean | null | undefined, never>;

export interface DeviceRequestsTable {
  request_id: Generated<string>;
  device_code_hash: Uint8Array;
  user_code_hmac: Uint8Array;
  client_id: string;
  scopes: string[];
  platform_name: string | null;
  platform_description: string | null;
  /** The icon's URL as the device sent it; never shown, only fetched by the server. */
  platform_icon: string | null;
  /** The icon once the server has fetched and stored it (platform_icons); null until then, or for good when the fetch failed. */
  platform_icon_sha256: Generated<Uint8Array | null>;
  /** The phrase the device shows and the choices the approval page offers; both null when its app's devices show none. */
  phrase: string | null;
  phrase_choices: string[] | null;
  status: ColumnType<DeviceRequestStatus, DeviceRequestStatus | undefined, DeviceRequestStatus>;
  denied_reason: DeniedReason | null;
  interval_seconds: number;
  last_polled_at: Timestamp | null;
  last_poll_too_fast: Generated<boolean>;
  created_at: Timestamp;
  expires_at: Timestamp;
  user_id: string | null;
  auth_time: Timestamp | null;
  decided_at: Timestamp | null;
  grant_id: string | null;
  /** Where the request came from (through TRUST_PROXY), kept as long as the request. */
  requester_ip: string | null;
  /** Bounded to USER_AGENT_MAX characters. */
  requester_user_agent: string | null;
  /** Both sides' places and the warnings shown, recorded with the decision (see proximity.ts). */
  decision_context: ColumnType<unknown, string | null | undefined, string | null>;
  /** RFC 9449 (draft-parecki-oauth-dpop-device-flow): every poll must prove this key. */
  dpop_jkt: Generated<string | null>;
  /** Where the approver was, stored with the approval so the poll's own statement returns it. */
  approver_ip: Generated<string | null>;
  /** A redeeming poll the policy refused (denied_reason redeemer_mismatch): where it came from. */
  redeemer_ip: Generated<string | null>;
}

export interface RefreshTokensTable {
  token_hash: Uint8Array;
  grant_id: string;
  created_at: Timestamp;
  expires_at: Timestamp;
}

export interface AccessTokensTable {
  token_hash: Uint8Array;
  grant_id: string;
  /** The grant's user and app, copied from it (fixed for the grant's life). */
  user_id: string;
  client_id: string;
  scopes: string[];
  created_at: Timestamp;
  expires_at: Timestamp;
  /** RFC 9449: the key a DPoP-bound token must be presented with; null for a Bearer token. */
  dpop_jkt: Generated<string | null>;
}

/**
 * Issue 32 §3: a token an app holds for itself (the client_credentials grant, RFC 6749 §4.4): no
 * user, no grant. Only its SHA-256 is stored; it goes with its app.
 */
export interface AppAccessTokensTable {
  token_hash: Uint8Array;
  client_id: string;
  scopes: string[];
  created_at: Timestamp;
  expires_at: Timestamp;
  /** RFC 9449: the key the token is bound to (an app registered to use DPoP), or null for a Bearer token. */
  dpop_jkt: Generated<string | null>;
}

export type SsfDeliveryMethod = 'urn:ietf:rfc:8935' | 'urn:ietf:rfc:8936';
export type SsfSubjectFormat = 'iss_sub' | 'email' | 'opaque' | 'complex';
export type SsfStreamStatus = 'enabled' | 'paused' | 'disabled';

/** Issue 32 §3: a Shared Signals stream (SSF 1.0 §8.1.1), of one app, its receiver. */
export interface SsfStreamsTable {
  stream_id: string;
  client_id: string;
  delivery_method: SsfDeliveryMethod;
  /** Push (RFC 8935): the receiver's endpoint; null for poll, whose endpoint is ours. */
  endpoint_url: string | null;
  /** Push: the Authorization header the receiver asked us to send, sealed under the key-encryption key. */
  authorization_header_sealed: Uint8Array | null;
  /** As the receiver asked (null: it did not say, and gets every event type we support). */
  events_requested: string[] | null;
  description: string | null;
  subject_format: Generated<SsfSubjectFormat>;
  status: Generated<SsfStreamStatus>;
  status_reason: string | null;
  created_at: Timestamp;
  updated_at: Timestamp;
  /** The last verification the receiver asked for (SSF 1.0 §8.1.4.2, min_verification_interval). */
  verification_requested_at: Timestamp | null;
}

/** Users a receiver removed from its stream (SSF 1.0 §8.1.3.3); every other subject is in it. */
export interface SsfExcludedSubjectsTable {
  stream_id: string;
  user_id: string;
}

/** A Security Event Token of a stream, its claims as fanned out; signed when delivered. */
export interface SsfSetsTable {
  jti: string;
  position: Generated<string>;
  stream_id: string;
  /** The event it tells of; null for a verification. */
  event_id: string | null;
  claims: ColumnType<Record<string, unknown>, string, string>;
  created_at: Timestamp;
}

/** The one event log (issue 32 §1): every change's fact, written in the change's transaction. */
export interface EventsTable {
  event_id: Generated<string>;
  /** A name of the vocabulary, events/vocabulary.ts ("grant.revoked"). */
  type: string;
  grant_id: string | null;
  user_id: string | null;
  client_id: string | null;
  /** For grant.issued, how; for grant.revoked, why (oauth/grant-revocation.ts). */
  reason: string | null;
  client_ip: string | null;
  created_at: Timestamp;
  /** The event's facts beyond the columns above (never a secret). */
  data: ColumnType<unknown, string | null | undefined, string | null>;
  /** Who made an admin change and how: {"kind": "admin", "via": "socket" | "token" | "cli", ...}. */
  actor: ColumnType<unknown, string | null | undefined, string | null>;
  /** The writing transaction (pg_current_xact_id), set by its default: see events/committed-events.ts. */
  transaction_id: Generated<string>;
}

/** Where each consumer that carries events out of the server has got to (events/committed-events.ts). */
export interface EventCursorsTable {
  consumer: string;
  transaction_id: string;
  event_id: string;
}

export interface RateLimitCountersTable {
  key: string;
  window_start: Timestamp;
  hits: number;
}

/** Platform icons fetched by the server, named by the SHA-256 of their bytes. */
export interface PlatformIconsTable {
  sha256: Uint8Array;
  content_type: string;
  bytes: Uint8Array;
  /** The app whose request stored it (null: stored before icons were bounded per app). */
  client_id: string | null;
  /** length(bytes), summed by the bounds of icon storage. */
  byte_count: ColumnType<number, number | undefined, number>;
  created_at: Timestamp;
  last_used_at: Timestamp;
}

/** An authorization code (OAuth 2.1 §4.1.2): its hash, what it is bound to, and the grant its redemption created. */
export interface AuthorizationCodesTable {
  code_hash: Uint8Array;
  client_id: string;
  user_id: string;
  redirect_uri: string;
  scopes: string[];
  /** PKCE (RFC 7636), S256 only. */
  code_challenge: string;
  nonce: string | null;
  auth_time: Timestamp;
  created_at: Timestamp;
  expires_at: Timestamp;
  redeemed_at: Timestamp | null;
  grant_id: string | null;
  /** RFC 9449 §10: the dpop_jkt of the authorization request; the redemption must prove it. */
  dpop_jkt: Generated<string | null>;
  /** Where the user signed in and agreed (bounded): the grant's origin (issue 31 §1). */
  signed_in_ip: ColumnType<string | null, string | null | undefined, never>;
}

/** RFC 9449 §11.1: proofs already accepted, by SHA-256 of their key thumbprint and jti. */
export interface DpopProofsTable {
  proof_hash: Uint8Array;
  expires_at: Timestamp;
}

/** The scopes a user has agreed to share with an app: asked once, until Remove access. */
export interface ConsentsTable {
  user_id: string;
  client_id: string;
  scopes: string[];
  granted_at: Timestamp;
}

/** Issue 31 §2: one operator rule of the device flow, for one app or (client_id null) every app. */
export interface DevicePolicyRulesTable {
  rule_id: Generated<string>;
  client_id: string | null;
  rule: string;
  mode: 'off' | 'report-only' | 'enforce';
  scopes: string[] | null;
  country_list: 'allow' | 'block' | null;
  countries: string[] | null;
  /** bigint[]: read as text (asns::text[]), written as numbers. */
  asns: ColumnType<string[] | null, number[] | null, number[] | null>;
  proximity_action: 'allow' | 'warn' | 'confirm' | 'deny' | null;
  /** Changes at every set (a sequence): counts are kept per revision, "since it was set". */
  revision: ColumnType<string, never, never>;
  set_at: Timestamp;
  refused: ColumnType<string, never, never>;
  would_have_refused: ColumnType<string, never, never>;
}

/**
 * One message to one target (a webhook endpoint, an SSF push stream), sent by the delivery
 * engine (src/delivery/) until it is delivered or given up.
 */
export interface OutboundDeliveriesTable {
  delivery_id: Generated<string>;
  /** Which DeliveryKind renders it: 'webhook' | 'ssf_push'. */
  target_kind: string;
  target_id: string;
  /** The event of the log it carries; null for a message of the kind's own (payload). */
  event_id: string | null;
  payload: ColumnType<unknown, string | null | undefined, string | null>;
  /** Rows of one target and key go out in order (a grant id, else a user id); null waits for nobody. */
  ordering_key: string | null;
  /** What the receiver sees (webhook-id, a SET's jti): the same on every attempt. */
  message_id: string;
  /** Null: held while its target is paused. */
  next_attempt_at: Date | null;
  attempts: Generated<number>;
  claimed_until: Date | null;
  delivered_at: Date | null;
  gave_up_at: Date | null;
  created_at: Timestamp;
}

/** One attempt at a delivery, as the delivery log shows it. */
export interface DeliveryAttemptsTable {
  attempt_id: Generated<string>;
  delivery_id: string;
  attempted_at: Timestamp;
  /** The receiver's status; null when no answer came (refused, timeout, connection failure). */
  http_status: number | null;
  error: string | null;
  duration_ms: number;
}

/** What the delivery engine knows of a target: failing since when, how often in a row, paused and why. */
export interface DeliveryTargetsTable {
  target_kind: string;
  target_id: string;
  failing_since: Date | null;
  failures: Generated<number>;
  paused_at: Date | null;
  pause_reason: 'operator' | 'failing' | null;
}

/** A webhook endpoint (issue 32 §2): its URL, the event types it takes (null: all), its sealed signing secret. */
export interface WebhooksTable {
  webhook_id: string;
  url: string;
  event_types: string[] | null;
  /** The Standard Webhooks secret (whsec_…), sealed under the key-encryption key (keys/sealing.ts). */
  sealed_secret: Uint8Array;
  created_at: Timestamp;
}

export interface DB {
  clients: ClientsTable;
  users: UsersTable;
  server_secrets: ServerSecretsTable;
  signing_keys: SigningKeysTable;
  browser_sessions: BrowserSessionsTable;
  grants: GrantsTable;
  device_requests: DeviceRequestsTable;
  refresh_tokens: RefreshTokensTable;
  access_tokens: AccessTokensTable;
  app_access_tokens: AppAccessTokensTable;
  ssf_streams: SsfStreamsTable;
  ssf_excluded_subjects: SsfExcludedSubjectsTable;
  ssf_sets: SsfSetsTable;
  events: EventsTable;
  event_cursors: EventCursorsTable;
  rate_limit_counters: RateLimitCountersTable;
  platform_icons: PlatformIconsTable;
  authorization_codes: AuthorizationCodesTable;
  consents: ConsentsTable;
  dpop_proofs: DpopProofsTable;
  device_policy_rules: DevicePolicyRulesTable;
  outbound_deliveries: OutboundDeliveriesTable;
  delivery_attempts: DeliveryAttemptsTable;
  delivery_targets: DeliveryTargetsTable;
  webhooks: WebhooksTable;
}

export type NewDeviceRequest = Insertable<DeviceRequestsTable>;
