import { parseArgs } from 'node:util';
import { ZodError } from 'zod';
import { ConfigError, loadConfig } from '../config.js';
import { connectDatabase, type DatabaseHandle } from '../db/connect.js';
import { migrateToLatest } from '../db/migrate.js';
import { banUser, unbanUser } from '../accounts/bans.js';
import { eventsOfUser } from '../accounts/events.js';
import { createUser, normaliseEmail } from '../accounts/users.js';
import { createClient } from '../oauth/clients.js';
import { setClientDisabledAt } from '../repositories/clients.js';
import { simulateDeviceLogin } from './login.js';
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
  client disable CLIENT_ID
  client enable CLIENT_ID
  user create --email EMAIL --password PASSWORD [--name NAME]
  user ban EMAIL
  user unban EMAIL
  login --client CLIENT_ID [--secret SECRET] [--issuer URL] [--scope SCOPE]
                                a device simulator: shows a code and phrase like a TV, polls, prints the tokens
  purge                         delete expired requests, sessions, tokens and long-ended chains now
  events --user EMAIL           what happened to each of the user's device links, as JSON lines

Reads DATABASE_URL (PostgreSQL) or DATA_DIR (embedded database, default ./data).
Prints JSON on stdout; errors go to stderr with a non-zero exit code.`;

type Options = Record<string, string | boolean | undefined>;

function parse(args: string[], options: Record<string, { type: 'string' }>) {
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

export async function runCli(argv: string[]): Promise<unknown> {
  const [command, sub, ...rest] = argv;
  switch (command) {
    case 'migrate':
      return withDatabase((d) => migrateToLatest(d.db), false);
    case 'client': {
      if (sub === 'create') {
        const { values } = parse(rest, { name: { type: 'string' }, kind: { type: 'string' }, type: { type: 'string' }, scope: { type: 'string' } });
        const scopes = (values.scope ?? 'openid profile email offline_access').split(' ').filter(Boolean);
        return withDatabase((d) =>
          createClient(d.db, {
            name: required(values, 'name'),
            kind: required(values, 'kind') as 'tv',
            type: required(values, 'type') as 'public',
            scopes,
          }),
        );
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
        const { values } = parse(rest, { email: { type: 'string' }, password: { type: 'string' }, name: { type: 'string' } });
        return withDatabase((d) => createUser(d.db, { email: required(values, 'email'), password: required(values, 'password'), name: values.name }));
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
        secret: { type: 'string' },
        issuer: { type: 'string' },
        scope: { type: 'string' },
      });
      const issuer = values.issuer ?? loadConfig().issuer;
      try {
        return await simulateDeviceLogin({
          issuer,
          clientId: required(values, 'client'),
          clientSecret: values.secret,
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
    case '--help':
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
    const usage = error instanceof UsageError || error instanceof ZodError || error instanceof ConfigError;
    process.stderr.write(`device-auth: ${describe(error)}\n`);
    process.exitCode = usage ? 2 : 1;
  }
}

await main();
