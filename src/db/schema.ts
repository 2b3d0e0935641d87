import type { ColumnType, Generated, Insertable, Selectable } from 'kysely';

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
  /** AES-256-GCM under the key-encryption key (lib/sealing.ts). */
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
}

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

export interface GrantEventsTable {
  event_id: Generated<string>;
  grant_id: string;
  user_id: string;
  client_id: string;
  event: string;
  reason: string | null;
  client_ip: string | null;
  created_at: Timestamp;
  /** For "issued": the decision's context, as recorded on its request. */
  details: ColumnType<unknown, string | null | undefined, string | null>;
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
  grant_events: GrantEventsTable;
  rate_limit_counters: RateLimitCountersTable;
  platform_icons: PlatformIconsTable;
  authorization_codes: AuthorizationCodesTable;
  consents: ConsentsTable;
  dpop_proofs: DpopProofsTable;
}

export type ClientRow = Selectable<ClientsTable>;
export type UserRow = Selectable<UsersTable>;
export type DeviceRequestRow = Selectable<DeviceRequestsTable>;
export type GrantRow = Selectable<GrantsTable>;
export type NewDeviceRequest = Insertable<DeviceRequestsTable>;
export type NewGrantEvent = Insertable<GrantEventsTable>;
