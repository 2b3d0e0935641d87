import pino from 'pino';
import { buildApp } from './app.js';
import { ConfigError, loadConfig } from './config.js';
import { connectDatabase } from './db/connect.js';
import { describeUnavailable, isDatabaseUnavailable } from './db/unavailable.js';
import { migrateToLatest } from './db/migrate.js';
import { createDeps } from './deps.js';
import { systemClock } from './lib/clock.js';
import { logDestination, loggerOptions } from './lib/logging.js';
import { purgeExpired } from './oauth/housekeeping.js';
import type { Deps } from './deps.js';

// The descriptor itself, not process.stdout: that stream would throw its EPIPE as an uncaught error.
const STDOUT = 1;

async function main(): Promise<void> {
  let config;
  try {
    config = loadConfig();
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`${error.message}\n`);
      process.exit(2);
    }
    throw error;
  }
  const log = pino(loggerOptions(config.logLevel), logDestination(STDOUT));
  const database = await connectDatabase({
    databaseUrl: config.databaseUrl,
    dataDir: config.dataDir,
    poolSize: config.databasePoolSize,
    preparedStatements: config.databasePreparedStatements,
  });
  if (config.migrateOnStart) {
    const { applied } = await migrateToLatest(database.db);
    if (applied.length > 0) log.info({ applied }, 'migrations applied');
  }
  const deps = await createDeps({ database, config, log, clock: systemClock });
  const app = await buildApp(deps, { logger: log });

  const purgeTimer = startPurging(deps);

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'shutting down');
    // Whatever happens, leave within a bound.
    const deadline = setTimeout(() => process.exit(1), 10_000);
    deadline.unref();
    if (purgeTimer) clearInterval(purgeTimer);
    await app.close();
    await deps.close();
    await database.close();
    log.info('stopped');
    process.exit(0);
  };
  process.on('SIGTERM', () => void stop('SIGTERM'));
  process.on('SIGINT', () => void stop('SIGINT'));

  await app.listen({ port: config.port, host: config.host });
  log.info({ issuer: config.issuer, database: database.kind }, 'device-auth ready');
}

/** Periodic purge; a failed run (database away) is logged and retried at the next tick. */
function startPurging(deps: Deps): NodeJS.Timeout | null {
  const seconds = deps.config.purgeIntervalSeconds;
  if (seconds === 0) return null;
  let running = false;
  const timer = setInterval(() => {
    if (running) return;
    running = true;
    purgeExpired(deps.db, deps.clock.now(), deps.config.purge)
      .then((counts) => deps.log.info({ purged: counts }, 'purge done'))
      .catch((error: unknown) =>
        // While the database is away this fails every tick: one line each, without a stack.
        deps.log.warn(isDatabaseUnavailable(error) ? describeUnavailable(error) : { err: error }, 'purge failed'),
      )
      .finally(() => (running = false));
  }, seconds * 1000);
  timer.unref();
  return timer;
}

main().catch((error: unknown) => {
  process.stderr.write(`device-auth failed to start: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
