import { z } from 'zod';
import type { Database } from '../db/connect.js';
import type { ClientKind, ClientType } from '../db/schema.js';
import type { Deps } from '../deps.js';
import { actorColumn, recordEvents, type Actor } from '../events/event-log.js';
import { revokeGrants } from '../oauth/grant-revocation.js';
import { MAX_PAGE_SIZE } from '../lib/paging.js';
import { randomToken, sha256 } from '../lib/random.js';
import {
  deleteClientRow,
  findClient,
  insertClient,
  listClients,
  replaceClientSecret,
  setClientDisabledAt,
  updateClientFields,
} from '../repositories/clients.js';
import { REGISTRABLE_SCOPES, SUPPORTED_SCOPES } from '../oauth/scopes.js';
import { AUTHORIZATION_CODE_GRANT, CLIENT_CREDENTIALS_GRANT, DEVICE_CODE_GRANT, REFRESH_TOKEN_GRANT } from '../oauth/metadata.js';
import { storedText } from '../lib/stored-text.js';

const CLIENT_SECRET_PREFIX = 'dacs_';

const clientName = storedText.trim().min(1).max(100);
/** A user's scopes, and the app's own (ssf.manage, ssf.read: the client_credentials grant's); new apps get the user's by default. */
const clientScopes = z
  .array(z.enum(REGISTRABLE_SCOPES))
  .min(1)
  .max(REGISTRABLE_SCOPES.length * 4);

/** The grant types an app can be registered for; refresh_token means it gets refresh tokens. */
const REGISTRABLE_GRANT_TYPES = [DEVICE_CODE_GRANT, REFRESH_TOKEN_GRANT, AUTHORIZATION_CODE_GRANT, CLIENT_CREDENTIALS_GRANT] as const;
const grantTypes = z
  .array(z.enum(REGISTRABLE_GRANT_TYPES))
  .min(1)
  .max(REGISTRABLE_GRANT_TYPES.length * 4);

/** What each kind could do before registrations said so, and still gets when its registration does not say. */
function defaultGrantTypes(kind: ClientKind): string[] {
  return kind === 'web' ? [DEVICE_CODE_GRANT] : [DEVICE_CODE_GRANT, REFRESH_TOKEN_GRANT];
}

const LOOPBACK_HOSTS = new Set(['127.0.0.1', '[::1]']);

/**
 * A redirect URI is compared exactly (OAuth 2.1 §2.3.1), so it is registered exactly as the URL
 * parser writes it: https, or http on a loopback address for native apps (RFC 8252 §7.3; the
 * name "localhost" is refused as §8.3 advises), with no fragment and no user name or password.
 */
const redirectUri = storedText.max(2000).superRefine((text, context) => {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    context.addIssue({ code: 'custom', message: 'is not an absolute URL' });
    return;
  }
  const loopbackHttp = url.protocol === 'http:' && LOOPBACK_HOSTS.has(url.hostname);
  if (url.protocol !== 'https:' && !loopbackHttp) {
    context.addIssue({ code: 'custom', message: 'must be https, or http on 127.0.0.1 or [::1]' });
  } else if (url.hash || text.includes('#')) {
    context.addIssue({ code: 'custom', message: 'must not have a fragment' });
  } else if (url.username || url.password) {
    context.addIssue({ code: 'custom', message: 'must not carry a user name or password' });
  } else if (url.href !== text) {
    context.addIssue({ code: 'custom', message: `must be written as ${url.href}` });
  }
});
const redirectUris = z.array(redirectUri).max(10);

const CONFIDENTIAL_NEEDED = 'only a confidential app can use the client_credentials grant: it acts for itself, proven by its secret alone (RFC 6749 §4.4)';
const REDIRECT_URIS_NEEDED = 'the authorization_code grant needs at least one redirect URI';
const CODE_GRANT_NEEDED =
  'redirect URIs and post-logout redirect URIs are used only by web sign-in (the authorization_code grant), which this app is not registered for: ' +
  'add authorization_code to grant_types (CLI: --grant-types "authorization_code refresh_token"), or register no such URIs';

/**
 * OAuth 2.1 §2.3: an app that receives codes has registered where they may be sent; and an app
 * that never receives codes has no use for a redirect URI or a post-logout one (a browser comes
 * back to it only after web sign-in), so registering one is refused rather than kept silently.
 * The grant is never added behind the operator's back: the refusal says what to change.
 */
function registrationProblem(type: ClientType, grants: readonly string[], redirects: readonly string[], postLogout: readonly string[]): string | null {
  // RFC 6749 §4.4: "The client credentials grant type MUST only be used by confidential clients."
  if (type !== 'confidential' && grants.includes(CLIENT_CREDENTIALS_GRANT)) return CONFIDENTIAL_NEEDED;
  const codeFlow = grants.includes(AUTHORIZATION_CODE_GRANT);
  if (codeFlow && redirects.length === 0) return REDIRECT_URIS_NEEDED;
  if (!codeFlow && (redirects.length > 0 || postLogout.length > 0)) return CODE_GRANT_NEEDED;
  return null;
}

export const newClientSchema = z
  .object({
    name: clientName,
    kind: z.enum(['tv', 'bot', 'web']),
    type: z.enum(['public', 'confidential']),
    scopes: clientScopes.default([...SUPPORTED_SCOPES]),
    /** RFC 7662 §2.1: registered as a resource server, only when asked (issue 28 §4); only a confidential web app can be. */
    introspection: z.boolean().optional(),
    /** RFC 7591 §2. Defaults to what its kind could always do (defaultGrantTypes). */
    grant_types: grantTypes.optional(),
    redirect_uris: redirectUris.default([]),
    /** OpenID Connect RP-Initiated Logout 1.0 §3.1, matched exactly like redirect_uris. */
    post_logout_redirect_uris: redirectUris.default([]),
    /** RFC 9449 §5.2: tokens only with a DPoP proof. */
    dpop_bound_access_tokens: z.boolean().default(false),
    /** Whether its devices show the confirmation phrase; stock RFC 8628 clients (oidc-agent) do not. */
    confirmation_phrase: z.boolean().default(true),
    /** Issue 32 §3, the operator's switch: its Shared Signals streams tell of every user, not only its own. */
    ssf_all_users: z.boolean().default(false),
  })
  .refine((client) => !client.introspection || isResourceServerShape(client), {
    message: 'only a confidential web app can be a resource server that introspects tokens',
    path: ['introspection'],
  })
  .superRefine((client, context) => {
    const grants = client.grant_types ?? defaultGrantTypes(client.kind);
    const problem = registrationProblem(client.type, grants, client.redirect_uris, client.post_logout_redirect_uris);
    if (problem !== null) context.addIssue({ code: 'custom', message: problem, path: [problem === CONFIDENTIAL_NEEDED ? 'grant_types' : 'redirect_uris'] });
  });

/** A TV or bot app is a device, never a resource server; a public client cannot authenticate the call. */
function isResourceServerShape(client: { kind: ClientKind; type: ClientType }): boolean {
  return client.kind === 'web' && client.type === 'confidential';
}

export interface CreatedClient {
  client_id: string;
  /** Shown once; only its SHA-256 hash is stored. Null for public clients. */
  client_secret: string | null;
  /** Whether it may introspect tokens (RFC 7662 §2.1). */
  introspection: boolean;
  grant_types: string[];
  redirect_uris: string[];
  post_logout_redirect_uris: string[];
  dpop_bound_access_tokens: boolean;
  confirmation_phrase: boolean;
}

/** Who made an app change and when, for its event. */
export interface ChangeContext {
  actor?: Actor | null;
  now?: Date;
}

/**
 * Client secrets have 256 random bits, so a SHA-256 hash protects them at rest without argon2's
 * cost. The row and its app.created event commit together.
 */
export async function createClient(
  db: Database,
  input: {
    name: string;
    kind: ClientKind;
    type: ClientType;
    scopes: string[];
    introspection?: boolean;
    grant_types?: string[];
    redirect_uris?: string[];
    post_logout_redirect_uris?: string[];
    dpop_bound_access_tokens?: boolean;
    confirmation_phrase?: boolean;
    ssf_all_users?: boolean;
  },
  context: ChangeContext = {},
): Promise<CreatedClient> {
  const valid = newClientSchema.parse(input);
  const clientId = `${valid.kind}_${randomToken(12)}`;
  const secret = valid.type === 'confidential' ? `${CLIENT_SECRET_PREFIX}${randomToken(32)}` : null;
  // Off unless asked: an app registered only to sign users in has no business reading others' tokens.
  const introspection = valid.introspection ?? false;
  const grants = [...new Set(valid.grant_types ?? defaultGrantTypes(valid.kind))];
  const redirects = [...new Set(valid.redirect_uris)];
  const postLogout = [...new Set(valid.post_logout_redirect_uris)];
  await db.transaction().execute(async (trx) => {
    await insertClient(trx, {
      client_id: clientId,
      name: valid.name,
      kind: valid.kind,
      type: valid.type,
      secret_hash: secret ? sha256(secret) : null,
      allowed_scopes: [...new Set(valid.scopes)],
      introspection_allowed: introspection,
      grant_types: grants,
      redirect_uris: redirects,
      post_logout_redirect_uris: postLogout,
      require_dpop: valid.dpop_bound_access_tokens,
      confirmation_phrase: valid.confirmation_phrase,
      ssf_all_users: valid.ssf_all_users,
    });
    await recordEvents(trx, [
      {
        type: 'app.created',
        client_id: clientId,
        created_at: context.now ?? new Date(),
        actor: actorColumn(context.actor),
        data: JSON.stringify({ kind: valid.kind, type: valid.type }),
      },
    ]);
  });
  return {
    client_id: clientId,
    client_secret: secret,
    introspection,
    grant_types: grants,
    redirect_uris: redirects,
    post_logout_redirect_uris: postLogout,
    dpop_bound_access_tokens: valid.dpop_bound_access_tokens,
    confirmation_phrase: valid.confirmation_phrase,
  };
}

/** What an operator sees of a client: never its secret's hash. */
export interface ClientView {
  client_id: string;
  name: string;
  kind: ClientKind;
  type: ClientType;
  scopes: string[];
  introspection: boolean;
  grant_types: string[];
  redirect_uris: string[];
  post_logout_redirect_uris: string[];
  dpop_bound_access_tokens: boolean;
  confirmation_phrase: boolean;
  ssf_all_users: boolean;
  created_at: string;
  disabled: boolean;
}

function toClientView(row: Awaited<ReturnType<typeof listClients>>[number]): ClientView {
  return {
    client_id: row.client_id,
    name: row.name,
    kind: row.kind,
    type: row.type,
    scopes: row.allowed_scopes,
    introspection: row.introspection_allowed,
    grant_types: row.grant_types,
    redirect_uris: row.redirect_uris,
    post_logout_redirect_uris: row.post_logout_redirect_uris,
    dpop_bound_access_tokens: row.require_dpop,
    confirmation_phrase: row.confirmation_phrase,
    ssf_all_users: row.ssf_all_users,
    created_at: row.created_at.toISOString(),
    disabled: row.disabled_at !== null,
  };
}

export async function clientPage(db: Database, page: { after?: string | undefined; limit: number }): Promise<ClientView[]> {
  return (await listClients(db, { ...page, limit: Math.min(page.limit, MAX_PAGE_SIZE) })).map(toClientView);
}

export async function showClient(db: Database, clientId: string): Promise<ClientView | undefined> {
  const row = await findClient(db, clientId);
  return row ? toClientView(row) : undefined;
}

export const clientChangesSchema = z
  .object({
    name: clientName.optional(),
    scopes: clientScopes.optional(),
    introspection: z.boolean().optional(),
    grant_types: grantTypes.optional(),
    redirect_uris: redirectUris.optional(),
    post_logout_redirect_uris: redirectUris.optional(),
    dpop_bound_access_tokens: z.boolean().optional(),
    confirmation_phrase: z.boolean().optional(),
    ssf_all_users: z.boolean().optional(),
  })
  .strict();

export type ClientChanges = z.input<typeof clientChangesSchema>;

export type ClientChangeOutcome = { kind: 'changed'; client: ClientView } | { kind: 'not_found' } | { kind: 'refused'; reason: string };

/**
 * A new name, scope set, introspection permission, grant types, redirect URIs or confirmation-phrase
 * setting (it applies to requests made after the change), or the Shared Signals switch (it applies
 * to events fanned out after the change). Tokens already
 * issued keep the scopes they were granted (they end with their grant); new requests are held to
 * the new registration at once, on every instance (the clients row's change is announced to every process's ClientDirectory).
 * The change and its app.changed event (naming the fields given) commit together.
 */
export async function changeClient(db: Database, clientId: string, changes: ClientChanges, context: ChangeContext = {}): Promise<ClientChangeOutcome> {
  const valid = clientChangesSchema.parse(changes);
  const current = await findClient(db, clientId);
  if (!current) return { kind: 'not_found' };
  if (valid.introspection && !isResourceServerShape(current)) {
    return { kind: 'refused', reason: 'only a confidential web app can be a resource server that introspects tokens' };
  }
  const problem = registrationProblem(
    current.type,
    valid.grant_types ?? current.grant_types,
    valid.redirect_uris ?? current.redirect_uris,
    valid.post_logout_redirect_uris ?? current.post_logout_redirect_uris,
  );
  if (problem !== null) return { kind: 'refused', reason: problem };
  const row = await db.transaction().execute(async (trx) => {
    const changed = await updateClientFields(trx, clientId, {
      ...(valid.name !== undefined && { name: valid.name }),
      ...(valid.scopes !== undefined && { allowed_scopes: [...new Set(valid.scopes)] }),
      ...(valid.introspection !== undefined && { introspection_allowed: valid.introspection }),
      ...(valid.grant_types !== undefined && { grant_types: [...new Set(valid.grant_types)] }),
      ...(valid.redirect_uris !== undefined && { redirect_uris: [...new Set(valid.redirect_uris)] }),
      ...(valid.post_logout_redirect_uris !== undefined && { post_logout_redirect_uris: [...new Set(valid.post_logout_redirect_uris)] }),
      ...(valid.dpop_bound_access_tokens !== undefined && { require_dpop: valid.dpop_bound_access_tokens }),
      ...(valid.confirmation_phrase !== undefined && { confirmation_phrase: valid.confirmation_phrase }),
      ...(valid.ssf_all_users !== undefined && { ssf_all_users: valid.ssf_all_users }),
    });
    if (changed) {
      await recordEvents(trx, [
        {
          type: 'app.changed',
          client_id: clientId,
          created_at: context.now ?? new Date(),
          actor: actorColumn(context.actor),
          data: JSON.stringify({ fields: Object.keys(valid).sort() }),
        },
      ]);
    }
    return changed;
  });
  return row ? { kind: 'changed', client: toClientView(row) } : { kind: 'not_found' };
}

/**
 * Whether the client was found. A disabled app is refused on every path at its next request.
 * app.disabled (or app.enabled) is recorded with the change when it is one: disabling a disabled
 * app records nothing.
 */
export async function setClientDisabled(db: Database, clientId: string, disabled: boolean, now: Date, actor: Actor | null = null): Promise<boolean> {
  return db.transaction().execute(async (trx) => {
    const before = await setClientDisabledAt(trx, clientId, disabled ? now : null);
    if (!before) return false;
    if (before.was_disabled !== disabled) {
      await recordEvents(trx, [{ type: disabled ? 'app.disabled' : 'app.enabled', client_id: clientId, created_at: now, actor: actorColumn(actor) }]);
    }
    return true;
  });
}

/** At most a week: a longer overlap is not a rotation. */
export const MAX_SECRET_GRACE_SECONDS = 7 * 86400;

export type SecretRotation =
  | { kind: 'rotated'; client_id: string; client_secret: string; previous_secret_expires_at: string | null }
  | { kind: 'not_found' }
  | { kind: 'public_client' };

/**
 * A new secret, shown once. With `graceSeconds` > 0 the replaced secret keeps working until then,
 * so the app's instances can be moved one by one; with 0 it stops at once. A rotation during a
 * grace period ends the older secret: only the one just replaced overlaps.
 */
export async function rotateClientSecret(db: Database, clientId: string, graceSeconds: number, now: Date, actor: Actor | null = null): Promise<SecretRotation> {
  const grace = z.number().int().min(0).max(MAX_SECRET_GRACE_SECONDS).parse(graceSeconds);
  const secret = `${CLIENT_SECRET_PREFIX}${randomToken(32)}`;
  const previousUntil = grace > 0 ? new Date(now.getTime() + grace * 1000) : null;
  // The event says that the secret changed and how long the old one lasts, never either secret.
  const row = await db.transaction().execute(async (trx) => {
    const rotated = await replaceClientSecret(trx, clientId, sha256(secret), previousUntil);
    if (rotated) {
      await recordEvents(trx, [
        {
          type: 'app.secret_rotated',
          client_id: clientId,
          created_at: now,
          actor: actorColumn(actor),
          data: JSON.stringify({ grace_period_seconds: grace, previous_secret_expires_at: previousUntil?.toISOString() ?? null }),
        },
      ]);
    }
    return rotated;
  });
  if (!row) return (await findClient(db, clientId)) ? { kind: 'public_client' } : { kind: 'not_found' };
  return {
    kind: 'rotated',
    client_id: row.client_id,
    client_secret: secret,
    previous_secret_expires_at: row.previous_secret_expires_at?.toISOString() ?? null,
  };
}

/**
 * Deletes the app and, with it, every grant, token and pending request it has, in one
 * transaction: each live grant is revoked first (grant.revoked, reason app_deleted), then the row
 * goes and app.deleted is recorded. The app's events stay, naming it by client_id, until
 * EVENT_RETENTION_DAYS have passed. Whether it was found.
 */
export async function deleteClient(deps: Pick<Deps, 'db' | 'clock' | 'metrics'>, clientId: string, actor: Actor | null = null): Promise<boolean> {
  const now = deps.clock.now();
  const revoked = await deps.db.transaction().execute(async (trx) => {
    const grants = await revokeGrants(trx, { clientId }, 'app_deleted', { now, ip: null, actor });
    if (!(await deleteClientRow(trx, clientId))) return null;
    await recordEvents(trx, [
      { type: 'app.deleted', client_id: clientId, created_at: now, actor: actorColumn(actor), data: JSON.stringify({ revoked_grants: grants.length }) },
    ]);
    return grants.length;
  });
  if (revoked === null) return false;
  deps.metrics.grantRevocations.inc({ reason: 'app_deleted' }, revoked);
  return true;
}
