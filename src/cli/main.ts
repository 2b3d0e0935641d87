import { existsSync } from 'node:fs';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { ZodError } from 'zod';
import { normaliseEmail } from '../accounts/users.js';
import { ConfigError, loadConfig } from '../config.js';
import type { DatabaseHandle } from '../db/connect.js';
import { dataDirOwner, DataDirInUse } from '../db/data-dir-lock.js';
import { DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE } from '../lib/paging.js';
import { packageVersion } from '../lib/paths.js';
import { inProcessAdmin, remoteAdmin, type AdminTransport } from './admin-client.js';
import { readSecret, SecretInputError, secretInArgv, type SecretSources } from './secrets.js';

// What only some commands need is imported when they run (about half a second of CPU saved for
// --version, --help and every command sent to a running server's admin API): the database
// drivers, the server's dependencies and routes, the key sealing, the device simulator.
const database = () => import('../db/connect.js');
const migrations = () => import('../db/migrate.js');

/** Output printed one JSON document per line. */
class JsonLines {
  constructor(readonly items: unknown[]) {}
}

/** A mistake of the caller: printed as one line on stderr, exit code 2. */
class UsageError extends Error {}

const USAGE = `usage: device-auth <command>

  migrate                       apply the schema's migrations (a server migrates at start)
  client create --name NAME --kind tv|bot|web --type public|confidential [--scope "openid profile email offline_access"]
                [--introspection] [--grant-types "device_code refresh_token"] [--redirect-uri URL ...]
                [--post-logout-redirect-uri URL ...] [--dpop] [--no-confirmation-phrase] [--ssf-all-users]
                                --dpop: tokens only with a DPoP proof (RFC 9449 dpop_bound_access_tokens).
                                --no-confirmation-phrase: its devices show no confirmation phrase (stock
                                RFC 8628 clients such as oidc-agent); the approval page then asks none.
                                --introspection: a confidential web app registered as a resource server,
                                which may introspect tokens; no other app can be. Grant types default
                                to what the kind always could: tv and bot "device_code refresh_token"
                                (refresh_token: it gets refresh tokens), web "device_code". A web app
                                that signs users in on the web adds authorization_code, which needs a
                                redirect URI: https, or http on 127.0.0.1 or [::1], matched exactly.
                                --post-logout-redirect-uri: where the end-session endpoint may send the
                                browser back after sign-out (same rules). Either kind of URI without
                                authorization_code among the grant types is refused.
                                A Shared Signals receiver: --type confidential --grant-types client_credentials
                                --scope "ssf.manage" (or ssf.read to read only); its streams tell of the users
                                with a grant of the app, or with --ssf-all-users of every user
  client list [--limit N] [--after CLIENT_ID]
                                one JSON line per client, in client_id order; the next page starts --after the last
  client show CLIENT_ID
  client update CLIENT_ID [--name NAME] [--scope "SCOPES"] [--introspection | --no-introspection]
                [--grant-types "GRANTS"] [--redirect-uri URL ... | --no-redirect-uris]
                [--post-logout-redirect-uri URL ... | --no-post-logout-redirect-uris] [--dpop | --no-dpop]
                [--confirmation-phrase | --no-confirmation-phrase] [--ssf-all-users | --no-ssf-all-users]
                                new requests are held to the new registration at once; issued tokens keep their scopes
  client rotate-secret CLIENT_ID [--grace SECONDS]
                                a new secret, shown once; the old one keeps working for SECONDS (default 0)
  client disable CLIENT_ID
  client enable CLIENT_ID
  client delete CLIENT_ID       with every grant, token and pending request of the app
  user create --email EMAIL [--name NAME] [--password-env VAR]
                                the password: typed at the prompt (not echoed), the first line of
                                standard input when it is not a terminal, or the variable VAR
  user list [--search TEXT] [--limit N] [--after EMAIL]
                                one JSON line per user, in email order; --search matches email or name
  user show EMAIL
  user update EMAIL --name NAME | --no-name
                                the user's name; the event records which fields changed, never their values
  user set-password EMAIL [--password-env VAR]
                                a new password (read as for user create); the user's browser sessions end,
                                devices and apps stay signed in
  user ban EMAIL
  user unban EMAIL
  user delete EMAIL             with the user's sessions, grants and tokens; their events stay, by user id,
                                for EVENT_RETENTION_DAYS
  user devices EMAIL            the user's signed-in devices, as their Devices page lists them
  user sign-out EMAIL GRANT_ID  sign one device out: its tokens stop at once
  user apps EMAIL               the apps with access to the user's account
  user remove-access EMAIL CLIENT_ID
                                every grant of that app for that user ends
  events [--type TYPE[,TYPE]] [--user EMAIL|USER_ID] [--app CLIENT_ID] [--grant GRANT_ID] [--since TIME] [--until TIME]
         [--limit N] [--after EVENT_ID]
                                the event log, as JSON lines, oldest first: every change with who made it and how,
                                events of deleted users (by user id) and apps included; --client is --app's older name
  events --follow [--type TYPE[,TYPE]] [--user EMAIL|USER_ID] [--app CLIENT_ID] [--grant GRANT_ID]
                                live: each event as it is committed, from now on, until Ctrl-C (SIGINT) or SIGTERM
  grants list [filters] [--limit N] [--after GRANT_ID]
                                grants with where they came from, one JSON line each (requester, approver and redeemer:
                                address, asn, country, hosting; the decision), in approval order
  grants count [filters]        {"count": N}
  grants revoke [filters] --dry-run
                                how many live grants the filters match, and a sample; nothing is revoked
  grants revoke [filters]       revoke them, in batches; {"revoked": N, "operation_id": ID}, named by every grant's event.
                                Filters (any combination; revoke needs one besides --live): --client ID[,ID], --user EMAIL,
                                --grant-type device_code|authorization_code, --asn N[,N] (the requester's or the redeemer's
                                network), --country CC[,CC] (ISO 3166-1 alpha-2), --hosting | --no-hosting, --signal NAME[,NAME],
                                --approved-after TIME, --approved-before TIME (ISO 8601), --live | --no-live
  purge                         delete expired requests, sessions, tokens and long-ended grants now
  housekeeping                  the server's periodic purge: last run, failures in a row, healthy or not
  keys list                     the signing keys, one JSON line each: state (next, active, retired, revoked), times, published or not
  keys rotate                   rotate now: the next key signs once every JWKS cache has seen it (JWKS_CACHE_SECONDS + 60 s
                                after it was made); the active key retires then and verifies its tokens until they expire
  keys revoke KID               emergency: the key leaves the JWKS and stops signing at once on every instance; if it was
                                signing, the next key takes over now and a new next key is made
  keys rewrap                   re-seal every private key and server secret under KEY_ENCRYPTION_KEY; run with the old key
                                as KEY_ENCRYPTION_KEY_PREVIOUS, then drop it (docs/operations.md, "Key-encryption key")
  policy set RULE off|report-only|enforce [--client CLIENT_ID] [--allow LIST | --block LIST | --action ACTION]
                                a device-flow rule for one app (--client) or every app, in force on every instance
                                within 5 s; report-only changes no answer and counts what it would have refused.
                                RULE: device-flow (enforce: the device flow is refused, new codes and polls),
                                device-scopes --allow "openid offline_access", device-countries --block CC,CC
                                or --allow CC,CC (ISO 3166-1 alpha-2), device-asns --block N,N, device-hosting
                                (enforce: refused from hosting networks), proximity-country-mismatch,
                                proximity-hosting-network, proximity-relay-network, proximity-unknown-location
                                --action allow|warn|confirm|deny, proximity-redeemer-mismatch --action allow|warn|deny
  policy list [--client CLIENT_ID]
                                the rules, one JSON line each: every one, or the app's own and the global ones
  policy report [--client CLIENT_ID]
                                per rule, how many requests it refused or would have refused since it was set
  assessment                    the RFC 10027 mitigations, one JSON line each, with their state as the server runs now
  webhooks add URL [--events TYPE,TYPE]
                                a webhook endpoint (https on a public address); prints {"id", "secret"}: the
                                signing secret (whsec_…) is shown this once. Without --events, every event type
  webhooks list [--limit N] [--after ID]
                                the endpoints, one JSON line each, with their state and backlog (never a secret)
  webhooks show ID
  webhooks pause ID             nothing is sent; everything queued and everything new is kept
  webhooks resume ID            the backlog is sent at once, in order (also after a pause for failing)
  webhooks remove ID            with its backlog and delivery log
  webhooks deliveries ID [--limit N] [--after ATTEMPT_ID]
                                the delivery log, one JSON line per attempt with its HTTP status, oldest first
  webhooks replay ID --since TIME
                                send again every event from TIME (ISO 8601) on that the endpoint takes, in order
  login --client CLIENT_ID [--secret-env VAR | --secret-stdin] [--issuer URL] [--scope SCOPE] [--dpop]
                                a device simulator: shows a code and phrase like a TV, polls, prints the tokens;
                                --dpop binds them to a fresh ES256 key (RFC 9449) and reads userinfo with it.
                                Without --issuer: the running server's, found as the admin commands find it
  --help, -h                    after any command: its usage; nothing runs
  --version                     the program's version

With a server running, commands go through its admin API, so they take effect at once: in
embedded mode the server's socket in DATA_DIR is found by itself; elsewhere set ADMIN_URL and
ADMIN_TOKEN. With none running they open the database (DATABASE_URL, or DATA_DIR, default ./data).
Passwords and client secrets are never taken on the command line (ps and shell history show it).
Prints JSON on stdout; errors go to stderr with a non-zero exit code.`;

type Options = Record<string, string | boolean | string[] | undefined>;

function parse<const T extends NonNullable<ParseArgsConfig['options']>>(args: string[], options: T) {
  try {
    return parseArgs({ args, options, allowPositionals: true, strict: true });
  } catch (error) {
    throw new UsageError(error instanceof Error ? error.message : String(error));
  }
}

function required(values: Options, name: string): string {
  const value = values[name];
  if (typeof value !== 'string' || value.length === 0) throw new UsageError(`--${name} is required`);
  return value;
}

function pageSize(given: string | undefined): number {
  if (given === undefined) return DEFAULT_PAGE_SIZE;
  const size = Number(given);
  if (!Number.isInteger(size) || size < 1 || size > MAX_PAGE_SIZE) throw new UsageError(`--limit must be a whole number from 1 to ${MAX_PAGE_SIZE}`);
  return size;
}

function onePositional(positionals: string[], what: string): string {
  if (positionals.length !== 1 || !positionals[0]) throw new UsageError(`expected exactly one ${what}`);
  return positionals[0];
}

const processSecretSources = (): SecretSources => ({ env: process.env, stdin: process.stdin, prompt: process.stderr });

/**
 * The usage lines of one command (or one subcommand): its line in USAGE and the lines indented
 * under it. The whole text when the command is unknown.
 */
export function helpFor(command: string | undefined, sub: string | undefined): string {
  const lines = USAGE.split('\n');
  const picked: string[] = [];
  let taking = false;
  for (const line of lines.slice(1)) {
    const words = line.trim().split(/\s+/);
    if (/^ {2}\S/.test(line)) taking = words[0] === command && (sub === undefined || sub.startsWith('-') || words[1] === sub);
    else if (!/^\s{3,}\S/.test(line)) taking = false;
    if (taking) picked.push(line);
  }
  return picked.length > 0 ? `usage: device-auth\n${picked.join('\n')}` : USAGE;
}

/** The database, directly: for `migrate`, which no server does for the CLI. */
async function withDatabase<T>(run: (database: DatabaseHandle) => Promise<T>): Promise<T> {
  const config = loadConfig();
  const opened = await (await database()).connectDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir, poolSize: 2 });
  try {
    return await run(opened);
  } finally {
    await opened.close();
  }
}

/**
 * The admin API of a running server: ADMIN_URL, or in embedded mode the socket of the server
 * holding DATA_DIR. Null when none is running (or none can be told from the environment).
 */
function runningServerAdmin(config: ReturnType<typeof loadConfig>): AdminTransport | null {
  const { admin } = config;
  if (admin.url) return remoteAdmin({ url: admin.url }, admin.token);
  if (!config.databaseUrl && existsSync(config.dataDir)) {
    const owner = dataDirOwner(config.dataDir);
    if (owner) {
      if (admin.socket !== null && existsSync(admin.socket)) return remoteAdmin({ socketPath: admin.socket }, admin.token);
      // Held by something without an admin socket (another command, a server with ADMIN_SOCKET=off).
      throw new DataDirInUse(config.dataDir, owner);
    }
  }
  return null;
}

/**
 * The issuer `login` talks to: --issuer, else the running server's own (asked through its admin
 * API, found as every admin command finds it, so its PORT or ISSUER need not be repeated here),
 * else this environment's ISSUER (or http://localhost:PORT).
 */
async function loginIssuer(given: string | undefined): Promise<{ issuer: string; how: string }> {
  if (given !== undefined) return { issuer: given, how: '--issuer' };
  const config = loadConfig();
  const running = runningServerAdmin(config);
  if (!running) return { issuer: config.issuer, how: config.issuer === `http://localhost:${config.port}` ? 'the default (no running server found)' : 'ISSUER' };
  try {
    const { issuer } = (await call(running, 'GET', '/admin/server')) as { issuer: string };
    return { issuer, how: `the running server (${running.where})` };
  } finally {
    await running.close();
  }
}

/**
 * Where the command's admin API is: a running server's (ADMIN_URL, or in embedded mode the socket
 * of the server holding DATA_DIR), or, with no server running, one in this process on the
 * database. The same routes answer either way, so the result is the same.
 */
async function openAdmin(): Promise<AdminTransport> {
  const config = loadConfig();
  const { admin } = config;
  const running = runningServerAdmin(config);
  if (running) return running;
  const [{ connectDatabase }, { migrateToLatest }, { createDeps }, { buildAdminApp }, { systemClock }, { default: pino }] = await Promise.all([
    database(),
    migrations(),
    import('../compose.js'),
    import('../admin-app.js'),
    import('../lib/clock.js'),
    import('pino'),
  ]);
  const opened = await connectDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir, poolSize: 2 });
  try {
    // Commands work on a fresh data folder too; migrating is idempotent.
    await migrateToLatest(opened.db);
    // Only a few commands show places (user devices): the others never read the location data.
    const deps = await createDeps({ database: opened, config, log: pino({ level: 'silent' }), clock: systemClock, locationData: 'on-first-use' });
    const app = await buildAdminApp(deps, { listener: 'in-process', logger: false });
    return inProcessAdmin(app, admin.token, async () => {
      await app.close();
      await deps.close();
      await opened.close();
    });
  } catch (error) {
    await opened.close();
    throw error;
  }
}

/** What to say for the API's refusals, in the CLI's words. */
interface Wording {
  notFound?: string;
  conflict?: string;
}

/** The admin API refused the call for a reason of the server's (auth, an outage): exit 1. */
class AdminRefusal extends Error {}

async function call(admin: AdminTransport, method: string, path: string, body?: unknown, wording: Wording = {}, signal?: AbortSignal): Promise<unknown> {
  const answer = await admin.send(method, path, body, signal);
  if (answer.status >= 200 && answer.status < 300) return answer.body;
  const detail = (answer.body as { detail?: unknown } | null)?.detail;
  const said = typeof detail === 'string' ? detail : `HTTP ${answer.status}`;
  if (answer.status === 404 && wording.notFound) throw new UsageError(wording.notFound);
  if (answer.status === 409 && wording.conflict) throw new UsageError(wording.conflict);
  if (answer.status === 401) throw new AdminRefusal(`${admin.where} refused the admin token: set ADMIN_TOKEN to the server's`);
  if (answer.status >= 400 && answer.status < 500) throw new UsageError(said);
  throw new AdminRefusal(`${admin.where}: ${said}`);
}

async function withAdmin<T>(run: (admin: AdminTransport) => Promise<T>): Promise<T> {
  const admin = await openAdmin();
  try {
    return await run(admin);
  } finally {
    await admin.close();
  }
}

const segment = encodeURIComponent;

function query(values: Record<string, string | number | undefined>): string {
  const pairs = Object.entries(values).filter((entry): entry is [string, string | number] => entry[1] !== undefined);
  return pairs.length === 0 ? '' : `?${new URLSearchParams(pairs.map(([k, v]) => [k, String(v)])).toString()}`;
}

const items = (body: unknown) => new JsonLines((body as { items: unknown[] }).items);

/** How long one long poll of `events --follow` waits on the server before asking again. */
const FOLLOW_WAIT_SECONDS = 20;

/**
 * `events --follow`: prints each event as a JSON line as soon as it is committed, from the
 * present on, by long polls of GET /admin/events/tail, until SIGINT or SIGTERM (then it stops at
 * once, abandoning the poll in flight, and exits 0). Every poll is bounded by the server's wait.
 */
async function followEvents(admin: AdminTransport, filters: Record<string, string | undefined>, wording: Wording): Promise<JsonLines> {
  const stop = new AbortController();
  const onSignal = () => stop.abort();
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    let position: string | undefined;
    while (!stop.signal.aborted) {
      let answer: { items: unknown[]; position: string };
      try {
        // The first ask only takes the present's position (wait=0): from its answer on, nothing is missed.
        const wait = position === undefined ? 0 : FOLLOW_WAIT_SECONDS;
        const path = `/admin/events/tail${query({ ...filters, position, wait, limit: MAX_PAGE_SIZE })}`;
        answer = (await call(admin, 'GET', path, undefined, wording, stop.signal)) as typeof answer;
      } catch (error) {
        if (stop.signal.aborted) break;
        throw error;
      }
      if (position === undefined) process.stderr.write(`device-auth: following events from ${admin.where} (Ctrl-C to stop)\n`);
      if (answer.items.length > 0) process.stdout.write(answer.items.map((item) => `${JSON.stringify(item)}\n`).join(''));
      position = answer.position;
    }
    return new JsonLines([]);
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}
const noClient = (clientId: string) => `no client ${clientId}: see \`device-auth client list\``;
const noUser = (email: string) => `no user ${normaliseEmail(email)}: see \`device-auth user list --search\``;

function scopeList(given: string): string[] {
  return given.split(' ').filter(Boolean);
}

/** RFC 8628's grant has a URN for a name; the CLI also takes its last part. */
async function grantTypeList(given: string): Promise<string[]> {
  const { DEVICE_CODE_GRANT } = await import('../oauth/metadata.js');
  return scopeList(given).map((grant) => (grant === 'device_code' ? DEVICE_CODE_GRANT : grant));
}

function wholeSeconds(given: string | undefined, name: string): number | undefined {
  if (given === undefined) return undefined;
  const value = Number(given);
  if (!/^\d+$/.test(given) || !Number.isSafeInteger(value)) throw new UsageError(`--${name} must be a whole number of seconds`);
  return value;
}

/** --FLAG / --no-FLAG: true, false, or undefined when neither is given. */
function switchSetting(values: Options, flag: string): boolean | undefined {
  if (values[flag] && values[`no-${flag}`]) throw new UsageError(`give --${flag} or --no-${flag}, not both`);
  if (values[flag]) return true;
  return values[`no-${flag}`] ? false : undefined;
}

async function clientCommand(sub: string | undefined, rest: string[]): Promise<unknown> {
  if (sub === 'create') {
    const { values } = parse(rest, {
      name: { type: 'string' },
      kind: { type: 'string' },
      type: { type: 'string' },
      scope: { type: 'string' },
      introspection: { type: 'boolean' },
      'no-introspection': { type: 'boolean' },
      'grant-types': { type: 'string' },
      'redirect-uri': { type: 'string', multiple: true },
      'post-logout-redirect-uri': { type: 'string', multiple: true },
      dpop: { type: 'boolean' },
      'confirmation-phrase': { type: 'boolean' },
      'no-confirmation-phrase': { type: 'boolean' },
      'ssf-all-users': { type: 'boolean' },
      'no-ssf-all-users': { type: 'boolean' },
    });
    if (values.introspection && values['no-introspection']) throw new UsageError('give --introspection or --no-introspection, not both');
    const confirmationPhrase = switchSetting(values, 'confirmation-phrase');
    const allUsers = switchSetting(values, 'ssf-all-users');
    const body = {
      name: required(values, 'name'),
      kind: required(values, 'kind'),
      type: required(values, 'type'),
      ...(values.scope !== undefined && { scopes: scopeList(values.scope) }),
      // Absent: not a resource server (--no-introspection, its old opposite, still says so explicitly).
      ...(values.introspection && { introspection: true }),
      ...(values['no-introspection'] && { introspection: false }),
      ...(values['grant-types'] !== undefined && { grant_types: await grantTypeList(values['grant-types']) }),
      ...(values['redirect-uri'] !== undefined && { redirect_uris: values['redirect-uri'] }),
      ...(values['post-logout-redirect-uri'] !== undefined && { post_logout_redirect_uris: values['post-logout-redirect-uri'] }),
      ...(values.dpop && { dpop_bound_access_tokens: true }),
      ...(confirmationPhrase !== undefined && { confirmation_phrase: confirmationPhrase }),
      ...(allUsers !== undefined && { ssf_all_users: allUsers }),
    };
    return withAdmin((admin) => call(admin, 'POST', '/admin/clients', body));
  }
  if (sub === 'list') {
    const { values } = parse(rest, { limit: { type: 'string' }, after: { type: 'string' } });
    const limit = pageSize(values.limit);
    return withAdmin(async (admin) => items(await call(admin, 'GET', `/admin/clients${query({ limit, after: values.after })}`)));
  }
  if (sub === 'update') {
    const { values, positionals } = parse(rest, {
      name: { type: 'string' },
      scope: { type: 'string' },
      introspection: { type: 'boolean' },
      'no-introspection': { type: 'boolean' },
      'grant-types': { type: 'string' },
      'redirect-uri': { type: 'string', multiple: true },
      'no-redirect-uris': { type: 'boolean' },
      'post-logout-redirect-uri': { type: 'string', multiple: true },
      'no-post-logout-redirect-uris': { type: 'boolean' },
      dpop: { type: 'boolean' },
      'no-dpop': { type: 'boolean' },
      'confirmation-phrase': { type: 'boolean' },
      'no-confirmation-phrase': { type: 'boolean' },
      'ssf-all-users': { type: 'boolean' },
      'no-ssf-all-users': { type: 'boolean' },
    });
    const clientId = onePositional(positionals, 'CLIENT_ID');
    if (values.introspection && values['no-introspection']) throw new UsageError('give --introspection or --no-introspection, not both');
    if (values['redirect-uri'] && values['no-redirect-uris']) throw new UsageError('give --redirect-uri or --no-redirect-uris, not both');
    if (values['post-logout-redirect-uri'] && values['no-post-logout-redirect-uris']) {
      throw new UsageError('give --post-logout-redirect-uri or --no-post-logout-redirect-uris, not both');
    }
    if (values.dpop && values['no-dpop']) throw new UsageError('give --dpop or --no-dpop, not both');
    const confirmationPhrase = switchSetting(values, 'confirmation-phrase');
    const allUsers = switchSetting(values, 'ssf-all-users');
    const changes = {
      ...(values.name !== undefined && { name: values.name }),
      ...(values.scope !== undefined && { scopes: scopeList(values.scope) }),
      ...(values.introspection && { introspection: true }),
      ...(values['no-introspection'] && { introspection: false }),
      ...(values['grant-types'] !== undefined && { grant_types: await grantTypeList(values['grant-types']) }),
      ...(values['redirect-uri'] !== undefined && { redirect_uris: values['redirect-uri'] }),
      ...(values['no-redirect-uris'] && { redirect_uris: [] }),
      ...(values['post-logout-redirect-uri'] !== undefined && { post_logout_redirect_uris: values['post-logout-redirect-uri'] }),
      ...(values['no-post-logout-redirect-uris'] && { post_logout_redirect_uris: [] }),
      ...(values.dpop && { dpop_bound_access_tokens: true }),
      ...(values['no-dpop'] && { dpop_bound_access_tokens: false }),
      ...(confirmationPhrase !== undefined && { confirmation_phrase: confirmationPhrase }),
      ...(allUsers !== undefined && { ssf_all_users: allUsers }),
    };
    if (Object.keys(changes).length === 0) {
      throw new UsageError(
        'nothing to change: give --name, --scope, --introspection, --no-introspection, --grant-types, --redirect-uri, --no-redirect-uris, --post-logout-redirect-uri, --no-post-logout-redirect-uris, --dpop, --no-dpop, --confirmation-phrase, --no-confirmation-phrase, --ssf-all-users or --no-ssf-all-users',
      );
    }
    return withAdmin((admin) => call(admin, 'PATCH', `/admin/clients/${segment(clientId)}`, changes, { notFound: noClient(clientId) }));
  }
  if (sub === 'rotate-secret') {
    const { values, positionals } = parse(rest, { grace: { type: 'string' } });
    const clientId = onePositional(positionals, 'CLIENT_ID');
    const grace = wholeSeconds(values.grace, 'grace') ?? 0;
    return withAdmin((admin) =>
      call(
        admin,
        'POST',
        `/admin/clients/${segment(clientId)}/secret`,
        { grace_period_seconds: grace },
        {
          notFound: noClient(clientId),
          conflict: `${clientId} is a public client: it has no secret to rotate`,
        },
      ),
    );
  }
  const simple: Record<string, [method: string, suffix: string]> = {
    show: ['GET', ''],
    disable: ['POST', '/disable'],
    enable: ['POST', '/enable'],
    delete: ['DELETE', ''],
  };
  const route = sub === undefined ? undefined : simple[sub];
  if (route) {
    const { positionals } = parse(rest, {});
    const clientId = onePositional(positionals, 'CLIENT_ID');
    return withAdmin((admin) => call(admin, route[0], `/admin/clients/${segment(clientId)}${route[1]}`, undefined, { notFound: noClient(clientId) }));
  }
  return undefined;
}

async function userCommand(sub: string | undefined, rest: string[], secrets: SecretSources): Promise<unknown> {
  if (sub === 'create') {
    const { values } = parse(rest, { email: { type: 'string' }, 'password-env': { type: 'string' }, name: { type: 'string' } });
    const email = required(values, 'email');
    const password = await readSecret('password', values['password-env'], secrets);
    return withAdmin((admin) =>
      call(
        admin,
        'POST',
        '/admin/users',
        { email, password, ...(values.name !== undefined && { name: values.name }) },
        {
          conflict: `a user with this email exists: use \`device-auth user show ${normaliseEmail(email)}\``,
        },
      ),
    );
  }
  if (sub === 'update') {
    const { values, positionals } = parse(rest, { name: { type: 'string' }, 'no-name': { type: 'boolean' } });
    const email = onePositional(positionals, 'EMAIL');
    if (values.name !== undefined && values['no-name']) throw new UsageError('give --name or --no-name, not both');
    if (values.name === undefined && !values['no-name']) throw new UsageError('nothing to change: give --name NAME or --no-name');
    const body = { name: values.name ?? null };
    return withAdmin((admin) => call(admin, 'PATCH', `/admin/users/${segment(normaliseEmail(email))}`, body, { notFound: noUser(email) }));
  }
  if (sub === 'set-password') {
    const { values, positionals } = parse(rest, { 'password-env': { type: 'string' } });
    const email = onePositional(positionals, 'EMAIL');
    const password = await readSecret('password', values['password-env'], secrets);
    return withAdmin((admin) => call(admin, 'PUT', `/admin/users/${segment(normaliseEmail(email))}/password`, { password }, { notFound: noUser(email) }));
  }
  if (sub === 'list') {
    const { values } = parse(rest, { search: { type: 'string' }, limit: { type: 'string' }, after: { type: 'string' } });
    const limit = pageSize(values.limit);
    return withAdmin(async (admin) => items(await call(admin, 'GET', `/admin/users${query({ limit, after: values.after, search: values.search })}`)));
  }
  if (sub === 'sign-out' || sub === 'remove-access') {
    const { positionals } = parse(rest, {});
    const what = sub === 'sign-out' ? 'GRANT_ID' : 'CLIENT_ID';
    if (positionals.length !== 2 || !positionals[0] || !positionals[1]) throw new UsageError(`expected EMAIL and ${what}`);
    const [email, id] = positionals as [string, string];
    const path = `/admin/users/${segment(normaliseEmail(email))}/${sub === 'sign-out' ? 'devices' : 'apps'}/${segment(id)}`;
    return withAdmin((admin) => call(admin, 'DELETE', path));
  }
  const simple: Record<string, [method: string, suffix: string, lines: boolean]> = {
    show: ['GET', '', false],
    ban: ['POST', '/ban', false],
    unban: ['POST', '/unban', false],
    delete: ['DELETE', '', false],
    devices: ['GET', '/devices', true],
    apps: ['GET', '/apps', true],
  };
  const route = sub === undefined ? undefined : simple[sub];
  if (route) {
    const { positionals } = parse(rest, {});
    const email = onePositional(positionals, 'EMAIL');
    return withAdmin(async (admin) => {
      const body = await call(admin, route[0], `/admin/users/${segment(normaliseEmail(email))}${route[1]}`, undefined, { notFound: noUser(email) });
      return route[2] ? items(body) : body;
    });
  }
  return undefined;
}

/** The filters of `grants list|count|revoke`, as the admin API names them (it validates them all, or refuses the whole call). */
const GRANT_FILTER_OPTIONS = {
  client: { type: 'string', multiple: true },
  user: { type: 'string' },
  'grant-type': { type: 'string' },
  asn: { type: 'string', multiple: true },
  country: { type: 'string', multiple: true },
  hosting: { type: 'boolean' },
  'no-hosting': { type: 'boolean' },
  signal: { type: 'string', multiple: true },
  'approved-after': { type: 'string' },
  'approved-before': { type: 'string' },
  live: { type: 'boolean' },
  'no-live': { type: 'boolean' },
} as const;

function eitherFlag(values: Options, name: string): boolean | undefined {
  if (values[name] && values[`no-${name}`]) throw new UsageError(`give --${name} or --no-${name}, not both`);
  if (values[name]) return true;
  return values[`no-${name}`] ? false : undefined;
}

function grantFilters(values: Options): Record<string, string | boolean | undefined> {
  const list = (name: string) => (values[name] === undefined ? undefined : (values[name] as string[]).join(','));
  return {
    client: list('client'),
    user: values.user === undefined ? undefined : normaliseEmail(values.user as string),
    grant_type: values['grant-type'] as string | undefined,
    asn: list('asn'),
    country: list('country'),
    hosting: eitherFlag(values, 'hosting'),
    signal: list('signal'),
    approved_after: values['approved-after'] as string | undefined,
    approved_before: values['approved-before'] as string | undefined,
    live: eitherFlag(values, 'live'),
  };
}

async function grantsCommand(sub: string | undefined, rest: string[]): Promise<unknown> {
  const wording = { notFound: 'no such user or client: see `device-auth user list` and `device-auth client list`' };
  if (sub === 'list') {
    const { values } = parse(rest, { ...GRANT_FILTER_OPTIONS, limit: { type: 'string' }, after: { type: 'string' } });
    const limit = pageSize(values.limit);
    const filters = Object.fromEntries(Object.entries(grantFilters(values)).map(([k, v]) => [k, v === undefined ? undefined : String(v)]));
    return withAdmin(async (admin) => items(await call(admin, 'GET', `/admin/grants${query({ ...filters, limit, after: values.after })}`, undefined, wording)));
  }
  if (sub === 'count') {
    const { values } = parse(rest, GRANT_FILTER_OPTIONS);
    const filters = Object.fromEntries(Object.entries(grantFilters(values)).map(([k, v]) => [k, v === undefined ? undefined : String(v)]));
    return withAdmin((admin) => call(admin, 'GET', `/admin/grants/count${query(filters)}`, undefined, wording));
  }
  if (sub === 'revoke') {
    const { values } = parse(rest, { ...GRANT_FILTER_OPTIONS, 'dry-run': { type: 'boolean' } });
    const body = { ...grantFilters(values), dry_run: values['dry-run'] === true };
    return withAdmin((admin) => call(admin, 'POST', '/admin/grants/revoke', body, wording));
  }
  return undefined;
}

const noKey = (kid: string) => `no signing key ${kid}: see \`device-auth keys list\``;

async function keysCommand(sub: string | undefined, rest: string[]): Promise<unknown> {
  if (sub === 'list') {
    parse(rest, {});
    return withAdmin(async (admin) => items(await call(admin, 'GET', '/admin/keys')));
  }
  if (sub === 'rotate') {
    parse(rest, {});
    return withAdmin((admin) => call(admin, 'POST', '/admin/keys/rotate'));
  }
  if (sub === 'revoke') {
    const { positionals } = parse(rest, {});
    const kid = onePositional(positionals, 'KID');
    return withAdmin((admin) =>
      call(admin, 'POST', `/admin/keys/${segment(kid)}/revoke`, undefined, {
        notFound: noKey(kid),
        conflict: `${kid} is the only key that can sign: run \`device-auth keys rotate\` first`,
      }),
    );
  }
  if (sub === 'rewrap') {
    parse(rest, {});
    const config = loadConfig();
    // Offline on the database, like migrate: the servers running on it open both keys meanwhile.
    if (!config.databaseUrl && existsSync(config.dataDir)) {
      const owner = dataDirOwner(config.dataDir);
      if (owner) throw new DataDirInUse(config.dataDir, owner);
    }
    if (!config.keyEncryption.current && config.databaseUrl)
      throw new UsageError('set KEY_ENCRYPTION_KEY (the new key) and KEY_ENCRYPTION_KEY_PREVIOUS (the old one)');
    const [{ migrateToLatest }, { asConfigError, loadSealer, rewrapAll }, { systemClock }, { default: pino }] = await Promise.all([
      migrations(),
      import('../keys/key-encryption.js'),
      import('../lib/clock.js'),
      import('pino'),
    ]);
    return withDatabase(async (d) => {
      await migrateToLatest(d.db);
      try {
        return await rewrapAll(d.db, loadSealer(config, pino({ level: 'silent' })), {
          now: systemClock.now(),
          actor: { kind: 'admin', via: 'cli' },
        });
      } catch (error) {
        throw asConfigError(error);
      }
    });
  }
  return undefined;
}

/** A comma-separated list as the rule's values: "DE,FR" or "DE, FR". */
function commaList(given: string): string[] {
  return given.split(',').map((item) => item.trim());
}

/** AS numbers, written 16509 or AS16509; the server refuses one beyond 4294967295. */
function asnList(given: string): number[] {
  return commaList(given).map((item) => {
    const digits = /^(?:AS)?(\d{1,20})$/i.exec(item)?.[1];
    if (digits === undefined) throw new UsageError(`--block: ${JSON.stringify(item.slice(0, 40))} is not an AS number (0 to 4294967295)`);
    return Number(digits);
  });
}

/** The values of `policy set`, in the admin API's names: which flag means what depends on the rule. */
function ruleValues(rule: string, values: Options): Record<string, unknown> {
  const allow = values.allow as string | undefined;
  const block = values.block as string | undefined;
  const action = values.action as string | undefined;
  if (allow !== undefined && block !== undefined) throw new UsageError('give --allow or --block, not both');
  if (rule === 'device-scopes') {
    if (block !== undefined) throw new UsageError('device-scopes takes --allow "SCOPES"');
    return allow === undefined ? {} : { scopes: scopeList(allow) };
  }
  if (rule === 'device-countries')
    return allow !== undefined ? { countries_allow: commaList(allow) } : block !== undefined ? { countries_block: commaList(block) } : {};
  if (rule === 'device-asns') {
    if (allow !== undefined) throw new UsageError('device-asns takes --block N,N');
    return block === undefined ? {} : { asns_block: asnList(block) };
  }
  if (allow !== undefined || block !== undefined) throw new UsageError(`${rule} takes no --allow or --block`);
  return action === undefined ? {} : { action };
}

async function policyCommand(sub: string | undefined, rest: string[]): Promise<unknown> {
  if (sub === 'set') {
    const { values, positionals } = parse(rest, {
      client: { type: 'string' },
      allow: { type: 'string' },
      block: { type: 'string' },
      action: { type: 'string' },
    });
    if (positionals.length !== 2 || !positionals[0] || !positionals[1]) throw new UsageError('expected RULE and MODE (off, report-only or enforce)');
    const [rule, mode] = positionals as [string, string];
    const body = { rule, mode, ...(values.client !== undefined && { client_id: values.client }), ...ruleValues(rule, values) };
    return withAdmin((admin) =>
      call(admin, 'POST', '/admin/device-policy/rules', body, values.client === undefined ? {} : { notFound: noClient(values.client) }),
    );
  }
  if (sub === 'list' || sub === 'report') {
    const { values } = parse(rest, { client: { type: 'string' } });
    const path = `/admin/device-policy/${sub === 'list' ? 'rules' : 'report'}${query({ client_id: values.client })}`;
    return withAdmin(async (admin) => items(await call(admin, 'GET', path)));
  }
  return undefined;
}

const noWebhook = (id: string) => `no webhook ${id}: see \`device-auth webhooks list\``;

async function webhooksCommand(sub: string | undefined, rest: string[]): Promise<unknown> {
  if (sub === 'add') {
    const { values, positionals } = parse(rest, { events: { type: 'string' } });
    const url = onePositional(positionals, 'URL');
    const body = { url, ...(values.events !== undefined && { events: commaList(values.events) }) };
    return withAdmin((admin) => call(admin, 'POST', '/admin/webhooks', body));
  }
  if (sub === 'list') {
    const { values } = parse(rest, { limit: { type: 'string' }, after: { type: 'string' } });
    const limit = pageSize(values.limit);
    return withAdmin(async (admin) => items(await call(admin, 'GET', `/admin/webhooks${query({ limit, after: values.after })}`)));
  }
  if (sub === 'deliveries') {
    const { values, positionals } = parse(rest, { limit: { type: 'string' }, after: { type: 'string' } });
    const id = onePositional(positionals, 'ID');
    // Attempts come many to an endpoint: a full page by default.
    const limit = values.limit === undefined ? MAX_PAGE_SIZE : pageSize(values.limit);
    const path = `/admin/webhooks/${segment(id)}/deliveries${query({ limit, after: values.after })}`;
    return withAdmin(async (admin) => items(await call(admin, 'GET', path, undefined, { notFound: noWebhook(id) })));
  }
  if (sub === 'replay') {
    const { values, positionals } = parse(rest, { since: { type: 'string' } });
    const id = onePositional(positionals, 'ID');
    const body = { since: required(values, 'since') };
    return withAdmin((admin) => call(admin, 'POST', `/admin/webhooks/${segment(id)}/replay`, body, { notFound: noWebhook(id) }));
  }
  const simple: Record<string, [method: string, suffix: string]> = {
    show: ['GET', ''],
    pause: ['POST', '/pause'],
    resume: ['POST', '/resume'],
    remove: ['DELETE', ''],
  };
  const route = sub === undefined ? undefined : simple[sub];
  if (route) {
    const { positionals } = parse(rest, {});
    const id = onePositional(positionals, 'ID');
    return withAdmin((admin) => call(admin, route[0], `/admin/webhooks/${segment(id)}${route[1]}`, undefined, { notFound: noWebhook(id) }));
  }
  return undefined;
}

export async function runCli(argv: string[], secrets: SecretSources = processSecretSources()): Promise<unknown> {
  // Refused before anything runs: the secret is already exposed, at least nothing is done with it.
  const refusal = secretInArgv(argv);
  if (refusal) throw new UsageError(refusal);
  const [command, sub, ...rest] = argv;
  // Anywhere on the line, help and version answer and nothing else runs: `purge --help` purges nothing.
  if (argv.includes('--help') || argv.includes('-h')) return helpFor(command === '--help' || command === '-h' ? undefined : command, sub);
  if (argv.includes('--version')) return `device-auth ${packageVersion()}`;
  const all = [sub, ...rest].filter((a): a is string => a !== undefined);
  switch (command) {
    case 'migrate': {
      parse(all, {});
      const config = loadConfig();
      // The server migrated at start; its database is its own while it runs.
      if (!config.databaseUrl && existsSync(config.dataDir)) {
        const owner = dataDirOwner(config.dataDir);
        if (owner) throw new DataDirInUse(config.dataDir, owner);
      }
      const { migrateToLatest } = await migrations();
      return withDatabase((d) => migrateToLatest(d.db));
    }
    case 'client': {
      const result = await clientCommand(sub, rest);
      if (result !== undefined) return result;
      break;
    }
    case 'user': {
      const result = await userCommand(sub, rest, secrets);
      if (result !== undefined) return result;
      break;
    }
    case 'grants': {
      const result = await grantsCommand(sub, rest);
      if (result !== undefined) return result;
      break;
    }
    case 'keys': {
      const result = await keysCommand(sub, rest);
      if (result !== undefined) return result;
      break;
    }
    case 'policy': {
      const result = await policyCommand(sub, rest);
      if (result !== undefined) return result;
      break;
    }
    case 'webhooks': {
      const result = await webhooksCommand(sub, rest);
      if (result !== undefined) return result;
      break;
    }
    case 'assessment':
      parse(all, {});
      return withAdmin(async (admin) => new JsonLines(((await call(admin, 'GET', '/admin/assessment')) as { mitigations: unknown[] }).mitigations));
    case 'login': {
      const { values } = parse(all, {
        client: { type: 'string' },
        'secret-env': { type: 'string' },
        'secret-stdin': { type: 'boolean' },
        issuer: { type: 'string' },
        scope: { type: 'string' },
        dpop: { type: 'boolean' },
      });
      if (values['secret-env'] !== undefined && values['secret-stdin']) throw new UsageError('give --secret-env or --secret-stdin, not both');
      // A public client (a TV) has no secret: one is read only when asked for.
      const clientSecret =
        values['secret-env'] !== undefined || values['secret-stdin'] ? await readSecret('client secret', values['secret-env'], secrets) : undefined;
      const { issuer, how } = await loginIssuer(values.issuer);
      const { simulateDeviceLogin } = await import('./login.js');
      try {
        return await simulateDeviceLogin({
          issuer,
          clientId: required(values, 'client'),
          clientSecret,
          scope: values.scope,
          dpop: values.dpop,
          screen: (text) => process.stderr.write(text),
        });
      } catch (error) {
        if (error instanceof TypeError) {
          const cause = error.cause instanceof Error ? `: ${error.cause.message}` : '';
          throw new Error(`cannot reach the server at ${issuer} (from ${how}): ${error.message}${cause}; is it running? Pass --issuer with its ISSUER`);
        }
        throw error;
      }
    }
    case 'purge':
      parse(all, {});
      return withAdmin((admin) => call(admin, 'POST', '/admin/purge'));
    case 'housekeeping':
      parse(all, {});
      return withAdmin((admin) => call(admin, 'GET', '/admin/housekeeping'));
    case 'events': {
      const { values } = parse(all, {
        type: { type: 'string', multiple: true },
        user: { type: 'string' },
        client: { type: 'string' },
        app: { type: 'string' },
        grant: { type: 'string' },
        since: { type: 'string' },
        until: { type: 'string' },
        limit: { type: 'string' },
        after: { type: 'string' },
        follow: { type: 'boolean' },
      });
      if (values.client !== undefined && values.app !== undefined) throw new UsageError('give --app or --client (the same), not both');
      const app = values.app ?? values.client;
      const filters = {
        type: values.type?.join(','),
        // An email is normalised; a user id is passed as it is.
        user: values.user === undefined ? undefined : values.user.includes('@') ? normaliseEmail(values.user) : values.user,
        app,
        grant: values.grant,
        since: values.since,
        until: values.until,
      };
      const wording = { notFound: values.user !== undefined ? noUser(values.user) : 'not found' };
      if (values.follow) {
        if (values.after !== undefined || values.since !== undefined || values.until !== undefined) {
          throw new UsageError('--follow starts at the present: it takes no --after, --since or --until');
        }
        return withAdmin((admin) => followEvents(admin, filters, wording));
      }
      // Events come many to a grant: a full page by default.
      const limit = values.limit === undefined ? MAX_PAGE_SIZE : pageSize(values.limit);
      const path = `/admin/events${query({ ...filters, after: values.after, limit })}`;
      return withAdmin(async (admin) => items(await call(admin, 'GET', path, undefined, wording)));
    }
    case undefined:
    case 'help':
      return USAGE;
  }
  throw new UsageError(`unknown command: ${[command, sub].filter(Boolean).join(' ')}\n${USAGE}`);
}

function describe(error: unknown): string {
  if (error instanceof ZodError) {
    return error.issues.map((i) => `${i.path.join('.') || 'input'}: ${i.message}`).join('; ');
  }
  if (error instanceof Error && 'code' in error && error.code === '23505') return 'already exists';
  return error instanceof Error ? error.message : String(error);
}

async function main(): Promise<void> {
  try {
    const result = await runCli(process.argv.slice(2));
    if (typeof result === 'string') process.stdout.write(`${result}\n`);
    else if (result instanceof JsonLines) process.stdout.write(result.items.map((item) => `${JSON.stringify(item)}\n`).join(''));
    else process.stdout.write(`${JSON.stringify(result)}\n`);
  } catch (error) {
    const usage = error instanceof UsageError || error instanceof ZodError || error instanceof ConfigError || error instanceof SecretInputError;
    // DataDirInUse and AdminRefusal are the server's state, not the call's: exit 1.
    process.stderr.write(`device-auth: ${describe(error)}\n`);
    process.exitCode = usage ? 2 : 1;
  }
}

await main();
