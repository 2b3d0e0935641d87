import { z } from 'zod';
import { MAX_PAGE_SIZE, DEFAULT_PAGE_SIZE } from '../../lib/paging.js';
import { CLIENT_ID_SYNTAX } from '../../oauth/client-auth.js';
import { storedText } from '../../lib/stored-text.js';
import { KID_SYNTAX } from '../../keys/signing-keys.js';

/** The admin API's shapes: they validate what comes in, shape what goes out, and are its OpenAPI document. */

export const pageQuery = {
  limit: z.coerce.number().int().min(1).max(MAX_PAGE_SIZE).default(DEFAULT_PAGE_SIZE).describe(`1 to ${MAX_PAGE_SIZE}`),
};

export const page = <T extends z.ZodType>(item: T) =>
  z.object({
    items: z.array(item),
    next_after: z.string().nullable().describe('pass as `after` for the next page; null on the last page'),
  });

export const clientIdParam = z.object({ clientId: z.string().regex(CLIENT_ID_SYNTAX, 'not a client id') });
/** Every text that reaches a query is stored text: a NUL or a lone surrogate is a 400, never the database's refusal. */
export const emailText = storedText.min(1).max(254);
export const emailParam = z.object({ email: emailText });

export const clientView = z.object({
  client_id: z.string(),
  name: z.string(),
  kind: z.enum(['tv', 'bot', 'web']),
  type: z.enum(['public', 'confidential']),
  scopes: z.array(z.string()),
  introspection: z.boolean(),
  grant_types: z.array(z.string()).describe('RFC 7591: the grants it may use; refresh_token means it gets refresh tokens'),
  redirect_uris: z.array(z.string()).describe('exact URLs the authorization endpoint may redirect to'),
  post_logout_redirect_uris: z.array(z.string()).describe('exact URLs the end-session endpoint may send the browser back to (RP-Initiated Logout)'),
  dpop_bound_access_tokens: z.boolean().describe('RFC 9449 §5.2: its token requests must carry a DPoP proof'),
  confirmation_phrase: z.boolean().describe('whether its devices show the confirmation phrase, so that the approval page asks for it'),
  ssf_all_users: z.boolean().describe("issue 32 §3: its Shared Signals streams tell of every user, not only of users with a grant of the app's"),
  created_at: z.string(),
  disabled: z.boolean(),
});

export const createdClient = z.object({
  client_id: z.string(),
  client_secret: z.string().nullable().describe('shown once; null for a public client'),
  introspection: z.boolean(),
  grant_types: z.array(z.string()),
  redirect_uris: z.array(z.string()),
  post_logout_redirect_uris: z.array(z.string()),
  dpop_bound_access_tokens: z.boolean(),
  confirmation_phrase: z.boolean(),
});

export const rotatedSecret = z.object({
  client_id: z.string(),
  client_secret: z.string().describe('shown once'),
  previous_secret_expires_at: z.string().nullable().describe('until when the replaced secret still works; null: it stopped at once'),
});

export const clientState = z.object({ client_id: z.string(), disabled: z.boolean() });
export const deleted = z.object({ deleted: z.literal(true) });

export const userView = z.object({
  user_id: z.string(),
  email: z.string(),
  name: z.string().nullable(),
  created_at: z.string(),
  banned: z.boolean(),
});

export const deviceView = z.object({
  grant_id: z.string(),
  client_id: z.string(),
  app: z.string(),
  platform_name: z.string().nullable().describe('what the device said about itself, unverified'),
  platform_description: z.string().nullable(),
  signed_in_at: z.string(),
  last_used_at: z.string(),
});

export const connectedAppView = z.object({
  client_id: z.string(),
  app: z.string(),
  kind: z.enum(['tv', 'bot', 'web']),
  devices: z.number().int().nullable(),
  last_used_at: z.string(),
});

export const eventView = z.object({
  event_id: z.string(),
  type: z.string().describe('a name of the event vocabulary, such as grant.revoked'),
  at: z.string(),
  reason: z.string().nullable().describe('for grant.revoked, why; for a refusal, by what'),
  grant_id: z.string().nullable(),
  user_id: z.string().nullable().describe('the user, by id (events outlive the account; they never name its email)'),
  client_id: z.string().nullable(),
  app: z.string().nullable().describe("the app's name while it exists"),
  client_ip: z.string().nullable(),
  data: z.unknown().describe('the facts of the event beyond its columns (never a secret or a password)'),
  actor: z
    .unknown()
    .describe('who made the change and how: {"kind": "admin", "via": "socket" | "token" | "cli"} or {"kind": "server"}; null when user_id and client_id say'),
});

/** The most values one list filter takes: enough for a campaign's networks, bounded for the query planner. */
const LIST_MAX = 100;

/**
 * A list filter: comma-separated in a query string (or the parameter repeated), an array in a
 * JSON body. Every item must pass, or the whole request is refused: a typo in one value never
 * silently narrows (or, for a revocation, widens) what the operator meant.
 */
export function listOf<T extends z.ZodType<unknown, string>>(item: T, what: string, most = LIST_MAX) {
  return z
    .union([z.string().max(most * 64), z.number(), z.array(z.union([z.string().max(256), z.number()])).max(most)])
    .transform((given) => (Array.isArray(given) ? given : typeof given === 'number' ? [given] : given.split(',')).map((v) => String(v).trim()))
    .pipe(z.array(item).min(1, `at least one ${what}`).max(most, `at most ${most} ${what}s`));
}

const purgedCounts = z.object({
  deviceRequests: z.number(),
  authorizationCodes: z.number(),
  browserSessions: z.number(),
  accessTokens: z.number(),
  grants: z.number(),
  rateLimitCounters: z.number(),
  dpopProofs: z.number(),
  deliveries: z.number().describe('webhook messages delivered or given up more than LINK_RETENTION ago, with their attempts'),
  platformIcons: z.number(),
  events: z.number().describe('events older than EVENT_RETENTION_DAYS'),
  securityEventTokens: z.number().describe('Shared Signals SETs a week old: never acknowledged, or long delivered'),
});
export const purged = purgedCounts;

export const serverInfo = z.object({ issuer: z.string(), version: z.string() });

export const housekeepingHealth = z.object({
  scheduled: z.boolean(),
  interval_seconds: z.number(),
  running: z.boolean(),
  last_run: z
    .object({
      started_at: z.string(),
      finished_at: z.string(),
      outcome: z.enum(['done', 'failed']),
      purged: purgedCounts.nullable(),
      error: z.string().nullable(),
    })
    .nullable(),
  last_success_at: z.string().nullable(),
  consecutive_failures: z.number(),
  healthy: z.boolean(),
});

export const kidParam = z.object({ kid: z.string().regex(KID_SYNTAX, 'not a key id (an RFC 7638 thumbprint, base64url)') });

export const keyView = z.object({
  kid: z.string(),
  alg: z.string(),
  state: z
    .enum(['next', 'active', 'retired', 'revoked'])
    .describe('next: published, not signing yet; active: signs; retired: verifies its tokens until they expire'),
  published: z.boolean().describe('served by /.well-known/jwks.json now'),
  created_at: z.string(),
  activates_at: z.string().nullable().describe('when it signs from; null: a next key not scheduled yet'),
  retired_at: z.string().nullable(),
  revoked_at: z.string().nullable(),
  published_until: z.string().nullable().describe('a retired key leaves the JWKS when the last token it signed has expired'),
});

export const keySchedule = z.object({
  active: z.string().describe('the kid signing now'),
  next: z.object({ kid: z.string(), activates_at: z.string().nullable() }).nullable(),
  keys: z.array(keyView),
});

const problem = z
  .object({ type: z.string(), title: z.string(), status: z.number(), detail: z.string() })
  .describe('RFC 9457 problem details (application/problem+json)');

/** The answers every admin route may give besides its own. */
export const problems = { 400: problem, 401: problem, 404: problem, 409: problem, 503: problem };

/** The next page's cursor: the last item's key when the page is full. */
export function nextAfter<T>(items: T[], limit: number, key: (item: T) => string): string | null {
  return items.length === limit && items.length > 0 ? key(items[items.length - 1]!) : null;
}
