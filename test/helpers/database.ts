import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { inject } from 'vitest';
import { connectDatabase, type DatabaseHandle } from '../../src/db/connect.js';
import { migrateToLatest } from '../../src/db/migrate.js';

export interface TestDatabase {
  handle: DatabaseHandle;
  /** postgres:// URL of this test's database, or null when embedded. */
  url: string | null;
  drop(): Promise<void>;
}

function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

/**
 * A fresh database: a clone of the migrated template on PostgreSQL, an in-memory PGlite
 * otherwise. `{ migrated: false }` leaves it empty, for tests of the migrations themselves.
 */
export async function createTestDatabase({ migrated = true }: { migrated?: boolean } = {}): Promise<TestDatabase> {
  const serverUrl = process.env.TEST_DATABASE_URL;
  const template = inject('templateDatabase');
  if (!serverUrl || !template) {
    const handle = await connectDatabase({ dataDir: 'memory://' });
    if (migrated) await migrateToLatest(handle.db);
    return { handle, url: null, drop: () => handle.close() };
  }
  const name = `device_auth_t_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name} TEMPLATE ${migrated ? template : 'template0'}`);
    // The server prepares its statements, and PostgreSQL may switch a prepared statement to its
    // generic plan (parameters unknown) after five runs. Tests run the generic plan from the
    // first run, so a statement that only works with its parameters' values known (an ON CONFLICT
    // target matching a partial index through a parameter, say) fails here, not in production.
    await admin.query(`ALTER DATABASE ${name} SET plan_cache_mode = force_generic_plan`);
  } finally {
    await admin.end();
  }
  const url = withDatabase(serverUrl, name);
  const handle = await connectDatabase({ databaseUrl: url, dataDir: 'unused', poolSize: 10 });
  return {
    handle,
    url,
    async drop() {
      await handle.close();
      const cleanup = new pg.Client({ connectionString: serverUrl });
      await cleanup.connect();
      try {
        await cleanup.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await cleanup.end();
      }
    },
  };
}
