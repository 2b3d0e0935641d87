import { isUtf8 } from 'node:buffer';
import { timingSafeEqual } from 'node:crypto';
import type { ClientKind, ClientType } from '../db/schema.js';
import type { Clock } from '../lib/clock.js';
import { sha256 } from '../lib/random.js';
import { invalidClient, invalidRequest, unauthorizedClient } from './errors.js';

export interface Client {
  clientId: string;
  name: string;
  kind: ClientKind;
  type: ClientType;
  allowedScopes: string[];
  /** RFC 7662 §2.1: registered as a resource server, so it may introspect tokens. */
  mayIntrospect: boolean;
  /** RFC 7591 §2: the grant types it is registered for; refresh_token among them means it gets refresh tokens. */
  grantTypes: readonly string[];
  redirectUris: readonly string[];
  /** OpenID Connect RP-Initiated Logout 1.0 §3.1: where the end-session endpoint may send the browser back. */
  postLogoutRedirectUris: readonly string[];
  /** RFC 9449 §5.2 dpop_bound_access_tokens: its token requests must carry a DPoP proof. */
  requireDpop: boolean;
  /** Whether its devices show the confirmation phrase; stock RFC 8628 clients do not, and their approval asks none. */
  confirmationPhrase: boolean;
}

export interface ClientCredentials {
  /** The Authorization header, if any. */
  authorization: string | undefined;
  /** client_id from the form, if any. */
  clientId: string | undefined;
  /** client_secret from the form, if any. */
  clientSecret: string | undefined;
  /** Whether the form carries client_assertion or client_assertion_type (RFC 7521 §4.2), a method this server does not support. */
  assertion: boolean;
}

/** One form-urlencoded half of the Basic credentials, decoded strictly; null if it cannot be stored text. */
function decodeBasicPart(encoded: string): string | null {
  try {
    const decoded = decodeURIComponent(encoded.replace(/\+/g, ' '));
    return decoded.includes('\u0000') ? null : decoded;
  } catch {
    return null;
  }
}

function decodeBasic(header: string): { id: string; secret: string } {
  const bytes = Buffer.from(header.slice('basic '.length).trim(), 'base64');
  // Not UTF-8 (a lone surrogate, an overlong form): refused, never turned into U+FFFD.
  const decoded = isUtf8(bytes) ? bytes.toString('utf8') : '';
  const colon = decoded.indexOf(':');
  // RFC 6749 §2.3.1: id and secret are form-urlencoded inside the Basic credentials.
  const id = colon < 0 ? null : decodeBasicPart(decoded.slice(0, colon));
  const secret = colon < 0 ? null : decodeBasicPart(decoded.slice(colon + 1));
  if (id === null || secret === null) throw invalidClient('malformed HTTP Basic credentials');
  return { id, secret };
}

/**
 * RFC 6749 Appendix A.1: a client_id is printable ASCII. Anything else cannot name a client, so it
 * never reaches SQL, whichever way it came in (a form, HTTP Basic, a page).
 */
export const CLIENT_ID_SYNTAX = /^[\x20-\x7e]{1,128}$/;

export interface RegisteredClient extends Client {
  secretHash: Buffer | null;
  /** The secret a rotation replaced, still accepted until `previousSecretUntil` (epoch ms). */
  previousSecretHash: Buffer | null;
  previousSecretUntil: number;
}

/**
 * Where client authentication finds a client by its id: the app registry's cluster-wide cache
 * (apps/directory.ts). An interface here, so that the protocol depends on what it reads, never on
 * the room that keeps it.
 */
export interface ClientLookup {
  /** Ends a rotated secret's grace period. */
  readonly clock: Clock;
  /** The client read fresh, with whether its app is disabled. */
  find(clientId: string): Promise<(RegisteredClient & { disabled: boolean }) | null>;
  /** The client as cached while the cache is trusted, for the hot token paths. */
  findStatic(clientId: string): Promise<RegisteredClient | null>;
}

/** RFC 6749 §5.2: a method the server does not support is invalid_client, like a failed one. */
const UNSUPPORTED_METHOD =
  'unsupported client authentication method: use HTTP Basic (client_secret_basic) or client_secret in the body (client_secret_post), or client_id alone for a public client';

/**
 * Who the request claims to be, and the secret if it gave one: HTTP Basic (client_secret_basic)
 * or client_id and client_secret in the body (client_secret_post), never both (RFC 6749 §2.3).
 * An empty secret is no secret: public clients in "header mode" (oidc-agent) send Basic
 * `client_id:` with an empty password, and some send `client_secret=` empty in the form.
 */
function presentedCredentials(credentials: ClientCredentials): { id: string; secret: string | undefined } {
  const { authorization, clientId, clientSecret, assertion } = credentials;
  const basic = authorization !== undefined && /^basic /i.test(authorization);
  const otherScheme = authorization !== undefined && !basic;
  const secretInBody = clientSecret !== undefined && clientSecret !== '';
  // RFC 6749 §2.3: a client MUST NOT use more than one authentication method in each request.
  if ([basic || otherScheme, secretInBody, assertion].filter(Boolean).length > 1) {
    throw invalidRequest('use one way to authenticate: HTTP Basic, client_secret in the body or a client assertion, not several');
  }
  if (otherScheme || assertion) throw invalidClient(UNSUPPORTED_METHOD);
  if (basic) {
    const { id, secret } = decodeBasic(authorization);
    if (clientId !== undefined && clientId !== id) throw invalidRequest('client_id does not match the HTTP Basic credentials');
    return { id, secret: secret === '' ? undefined : secret };
  }
  if (clientId !== undefined) return { id: clientId, secret: secretInBody ? clientSecret : undefined };
  if (secretInBody) throw invalidClient('client_secret needs its client_id');
  throw invalidClient('client authentication is required: HTTP Basic or client_secret_post for confidential clients, client_id for public clients');
}

/**
 * Secrets are compared by their SHA-256 hash, in constant time; after a rotation, the replaced
 * secret is accepted until its grace period ends. Both comparisons always run, so the time taken
 * does not tell which secret matched.
 */
function verifySecret(client: RegisteredClient, secret: string | undefined, now: number): void {
  if (client.type === 'confidential') {
    if (secret === undefined) throw invalidClient('this client is confidential and must authenticate with its secret (HTTP Basic or client_secret_post)');
    const presented = sha256(secret);
    const current = client.secretHash !== null && timingSafeEqual(client.secretHash, presented);
    const previous = client.previousSecretHash !== null && timingSafeEqual(client.previousSecretHash, presented);
    if (!current && !(previous && now < client.previousSecretUntil)) throw invalidClient('client authentication failed');
  } else if (secret !== undefined) {
    throw invalidClient('this client is public and has no secret');
  }
}

export function publicView(client: RegisteredClient): Client {
  return {
    clientId: client.clientId,
    name: client.name,
    kind: client.kind,
    type: client.type,
    allowedScopes: client.allowedScopes,
    mayIntrospect: client.mayIntrospect,
    grantTypes: client.grantTypes,
    redirectUris: client.redirectUris,
    postLogoutRedirectUris: client.postLogoutRedirectUris,
    requireDpop: client.requireDpop,
    confirmationPhrase: client.confirmationPhrase,
  };
}

/** RFC 6749 §5.2: a grant type its registration does not name is unauthorized_client, whatever its kind. */
export function requireGrantType(client: Client, grantType: string): void {
  if (!client.grantTypes.includes(grantType)) throw unauthorizedClient(`this client is not registered for the ${grantType} grant`);
}

export const DISABLED_APP = 'this app is disabled';

/**
 * RFC 6749 §2.3: confidential clients authenticate with HTTP Basic (client_secret_basic) or
 * client_secret_post; public clients identify themselves with client_id, in the form or as Basic
 * with an empty password (auth method none). A disabled app is refused.
 */
export async function authenticateClient(clients: ClientLookup, credentials: ClientCredentials): Promise<Client> {
  const { id, secret } = presentedCredentials(credentials);
  const client = await clients.find(id);
  if (!client) throw invalidClient('unknown client');
  verifySecret(client, secret, clients.clock.now().getTime());
  if (client.disabled) throw invalidClient(DISABLED_APP);
  return publicView(client);
}

/**
 * authenticateClient for the hot token paths: the credentials are checked against the cached
 * client, and the caller MUST refuse a disabled app in its own SQL (the grant types' handlers do).
 */
export async function identifyClient(clients: ClientLookup, credentials: ClientCredentials): Promise<Client> {
  const { id, secret } = presentedCredentials(credentials);
  const client = await clients.findStatic(id);
  if (!client) throw invalidClient('unknown client');
  verifySecret(client, secret, clients.clock.now().getTime());
  return publicView(client);
}

/**
 * For a hot path that found nothing to act on (an unknown token or code): its statement could not
 * say whether the app is disabled, so ask now, off the hot path.
 */
export async function refuseIfDisabled(clients: ClientLookup, client: Client): Promise<void> {
  const fresh = await clients.find(client.clientId);
  if (!fresh || fresh.disabled) throw invalidClient(DISABLED_APP);
}
