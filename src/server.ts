import pino from 'pino';
import { buildApp } from './app.js';
import { startAdminListeners, type AdminListeners } from './admin-listeners.js';
import { ConfigError, loadConfig } from './config.js';
import { connectDatabase } from './db/connect.js';
import { migrateToLatest } from './db/migrate.js';
import { createDeps } from './compose.js';
import { systemClock } from './lib/clock.js';
import { logDestination, loggerOptions } from './lib/logging.js';

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

  deps.housekeeping.schedule();
  deps.deliveries.start();

  let adminApi: AdminListeners | null = null;
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'shutting down');
    // Whatever happens, leave within a bound.
    const deadline = setTimeout(() => process.exit(1), 10_000);
    deadline.unref();
    await Promise.all([app.close(), adminApi?.close()]);
    await deps.close();
    await database.close();
    log.info('stopped');
    process.exit(0);
  };
  process.on('SIGTERM', () => void stop('SIGTERM'));
  process.on('SIGINT', () => void stop('SIGINT'));

  adminApi = await startAdminListeners(deps, log);
  await app.listen({ port: config.port, host: config.host });
  log.info({ issuer: config.issuer, database: database.kind }, 'device-auth ready');
}

main().catch((error: unknown) => {
  // A setting that is only found wrong once used (GEOIP_DATABASE's contents) reads like any other.
  if (error instanceof ConfigError) {
    process.stderr.write(`${error.message}\n`);
    process.exit(2);
  }
  process.stderr.write(`device-auth failed to start: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
