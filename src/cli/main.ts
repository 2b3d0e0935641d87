import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE } from '../lib/paging.js';
import { projectRoot } from '../lib/paths.js';
import { ZodError } from 'zod';
import { ConfigError, loadConfig } from '../config.js';
import { connectDatabase, type DatabaseHandle } from '../db/connect.js';
import { migrateToLatest } from '../db/migrate.js';
import { banUser, unbanUser } from '../accounts/bans.js';
import { eventsOfUser } from '../accounts/events.js';
import { createUser, normaliseEmail, showUser, userPage } from '../accounts/users.js';
import { clientPage, createClient, showClient } from '../oauth/clients.js';
import { setClientDisabledAt } from '../repositories/clients.js';
import { simulateDeviceLogin } from './login.js';
import { readSecret, SecretInputError, secretInArgv, type SecretSources } from './secrets.js';
import { purgeExpired } from '../oauth/housekeeping.js';

/** Output printed one JSON document per line. */
class JsonLines {
  constructor(readonly items: unknown[]) {}
}

/** A mistake of the caller: printed as one line on stderr, exit code 2. */
class UsageError extends Error {}

const USAGE = `usage: device-auth <command>

  migrate
  client create --name NAME --kind tv|bot|web --type public|confidential [--scope "openid profile email offline_access"]
                [--no-introspection]
                                a confidential web app is a resource server that may introspect tokens
                                unless --no-introspection; a tv or bot app never is
  client list [--limit N] [--after CLIENT_ID]
                                one JSON line per client, in client_id order; the next page starts --after the last
  client show CLIENT_ID
  client disable CLIENT_ID
  client enable CLIENT_ID
  user create --email EMAIL [--name NAME] [--password-env VAR]
                                the password: typed at the prompt (not echoed), the first line of
                                standard input when it is not a terminal, or the variable VAR
  user list [--search TEXT] [--limit N] [--after EMAIL]
                                one JSON line per user, in email order; --search matches email or name
  user show EMAIL
  user ban EMAIL
  user unban EMAIL
  login --client CLIENT_ID [--secret-env VAR | --secret-stdin] [--issuer URL] [--scope SCOPE]
                                a device simulator: shows a code and phrase like a TV, polls, prints the tokens
  purge                         delete expired requests, sessions, tokens and long-ended chains now
  events --user EMAIL           what happened to each of the user's device links, as JSON lines
  --help, -h                    after any command: its usage; nothing runs
  --version                     the program's version

Passwords and client secrets are never taken on the command line (ps and shell history show it).
Reads DATABASE_URL (PostgreSQL) or DATA_DIR (embedded database, default ./data).
Prints JSON on stdout; errors go to stderr with a non-zero exit code.`;

type Options = Record<string, string | boolean | undefined>;

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

function notFound(message: string): never {
  throw new UsageError(message);
}

function onePositional(positionals: string[], what: string): string {
  if (positionals.length !== 1 || !positionals[0]) throw new UsageError(`expected exactly one ${what}`);
  return positionals[0];
}

async function withDatabase<T>(run: (database: DatabaseHandle) => Promise<T>, migrate = true): Promise<T> {
  const config = loadConfig();
  const database = await connectDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir, poolSize: 2 });
  try {
    // Commands work on a fresh data folder too; migrating is idempotent.
    if (migrate) await migrateToLatest(database.db);
    return await run(database);
  } finally {
    await database.close();
  }
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
    if (/^  \S/.test(line)) taking = words[0] === command && (sub === undefined || sub.startsWith('-') || words[1] === sub);
    else if (!/^\s{3,}\S/.test(line)) taking = false;
    if (taking) picked.push(line);
  }
  return picked.length > 0 ? `usage: device-auth\n${picked.join('\n')}` : USAGE;
}

function packageVersion(): string {
  return (JSON.parse(readFileSync(path.join(projectRoot, 'package.json'), 'utf8')) as { version: string }).version;
}

export async function runCli(argv: string[], secrets: SecretSources = processSecretSources()): Promise<unknown> {
  // Refused before anything runs: the secret is already exposed, at least nothing is done with it.
  const refusal = secretInArgv(argv);
  if (refusal) throw new UsageError(refusal);
  const [command, sub, ...rest] = argv;
  // Anywhere on the line, help and version answer and nothing else runs: `purge --help` purges nothing.
  if (argv.includes('--help') || argv.includes('-h')) return helpFor(command === '--help' || command === '-h' ? undefined : command, sub);
  if (argv.includes('--version')) return `device-auth ${packageVersion()}`;
  switch (command) {
    case 'migrate':
      return withDatabase((d) => migrateToLatest(d.db), false);
    case 'client': {
      if (sub === 'create') {
        const { values } = parse(rest, {
          name: { type: 'string' },
          kind: { type: 'string' },
          type: { type: 'string' },
          scope: { type: 'string' },
          'no-introspection': { type: 'boolean' },
        });
        const scopes = (values.scope ?? 'openid profile email offline_access').split(' ').filter(Boolean);
        return withDatabase((d) =>
          createClient(d.db, {
            name: required(values, 'name'),
            kind: required(values, 'kind') as 'tv',
            type: required(values, 'type') as 'public',
            scopes,
            // Absent: the default of the kind and type (createClient).
            introspection: values['no-introspection'] ? false : undefined,
          }),
        );
      }
      if (sub === 'list') {
        const { values } = parse(rest, { limit: { type: 'string' }, after: { type: 'string' } });
        const limit = pageSize(values.limit);
        return withDatabase(async (d) => new JsonLines(await clientPage(d.db, { after: values.after, limit })));
      }
      if (sub === 'show') {
        const { positionals } = parse(rest, {});
        const clientId = onePositional(positionals, 'CLIENT_ID');
        return withDatabase(async (d) => (await showClient(d.db, clientId)) ?? notFound(`no client ${clientId}: see \`device-auth client list\``));
      }
      if (sub === 'disable' || sub === 'enable') {
        const { positionals } = parse(rest, {});
        const clientId = onePositional(positionals, 'CLIENT_ID');
        return withDatabase(async (d) => {
          const found = await setClientDisabledAt(d.db, clientId, sub === 'disable' ? new Date() : null);
          if (!found) throw new UsageError(`no client ${clientId}`);
          return { client_id: clientId, disabled: sub === 'disable' };
        });
      }
      break;
    }
    case 'user': {
      if (sub === 'create') {
        const { values } = parse(rest, { email: { type: 'string' }, 'password-env': { type: 'string' }, name: { type: 'string' } });
        const email = required(values, 'email');
        const password = await readSecret('password', values['password-env'], secrets);
        return withDatabase(async (d) => {
          if (await showUser(d.db, email)) throw new UsageError(`a user with this email exists: use \`device-auth user show ${normaliseEmail(email)}\``);
          return createUser(d.db, { email, password, name: values.name });
        });
      }
      if (sub === 'list') {
        const { values } = parse(rest, { search: { type: 'string' }, limit: { type: 'string' }, after: { type: 'string' } });
        const limit = pageSize(values.limit);
        return withDatabase(async (d) => new JsonLines(await userPage(d.db, { search: values.search, after: values.after, limit })));
      }
      if (sub === 'show') {
        const { positionals } = parse(rest, {});
        const email = onePositional(positionals, 'EMAIL');
        return withDatabase(async (d) => (await showUser(d.db, email)) ?? notFound(`no user ${normaliseEmail(email)}: see \`device-auth user list --search\``));
      }
      if (sub === 'ban' || sub === 'unban') {
        const { positionals } = parse(rest, {});
        const email = normaliseEmail(onePositional(positionals, 'EMAIL'));
        return withDatabase(async (d) => {
          const result = sub === 'ban' ? await banUser(d.db, email, new Date()) : await unbanUser(d.db, email);
          if (!result) throw new UsageError(`no user ${email}`);
          return { ...result, banned: sub === 'ban' };
        });
      }
      break;
    }
    case 'login': {
      const { values } = parse([sub, ...rest].filter((a): a is string => a !== undefined), {
        client: { type: 'string' },
        'secret-env': { type: 'string' },
        'secret-stdin': { type: 'boolean' },
        issuer: { type: 'string' },
        scope: { type: 'string' },
      });
      if (values['secret-env'] !== undefined && values['secret-stdin']) throw new UsageError('give --secret-env or --secret-stdin, not both');
      // A public client (a TV) has no secret: one is read only when asked for.
      const clientSecret =
        values['secret-env'] !== undefined || values['secret-stdin'] ? await readSecret('client secret', values['secret-env'], secrets) : undefined;
      const issuer = values.issuer ?? loadConfig().issuer;
      try {
        return await simulateDeviceLogin({
          issuer,
          clientId: required(values, 'client'),
          clientSecret,
          scope: values.scope,
          screen: (text) => process.stderr.write(text),
        });
      } catch (error) {
        if (error instanceof TypeError) {
          const cause = error.cause instanceof Error ? `: ${error.cause.message}` : '';
          throw new Error(`cannot reach the server: ${error.message}${cause}`);
        }
        throw error;
      }
    }
    case 'purge': {
      const config = loadConfig();
      return withDatabase((d) => purgeExpired(d.db, new Date(), config.purge));
    }
    case 'events': {
      const { values } = parse([sub, ...rest].filter((a): a is string => a !== undefined), { user: { type: 'string' } });
      const email = normaliseEmail(required(values, 'user'));
      return withDatabase(async (d) => {
        const events = await eventsOfUser(d.db, email);
        if (!events) throw new UsageError(`no user ${email}`);
        return new JsonLines(events);
      });
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
    process.stderr.write(`device-auth: ${describe(error)}\n`);
    process.exitCode = usage ? 2 : 1;
  }
}

await main();
