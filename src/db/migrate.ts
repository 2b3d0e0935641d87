import { Migrator, type Kysely, type MigrationProvider } from 'kysely';
import { migrations } from '../../migrations/index.js';

const provider: MigrationProvider = { getMigrations: async () => migrations };

function migrator(db: Kysely<any>): Migrator {
  return new Migrator({
    db,
    provider,
    migrationTableName: 'schema_migrations',
    migrationLockTableName: 'schema_migrations_lock',
  });
}

export interface MigrationOutcome {
  applied: string[];
}

export async function migrateToLatest(db: Kysely<any>): Promise<MigrationOutcome> {
  const { error, results } = await migrator(db).migrateToLatest();
  if (error) throw error instanceof Error ? error : new Error(String(error));
  return { applied: (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName) };
}

/** True when every migration shipped with this build has been applied. */
export async function migrationsAreCurrent(db: Kysely<any>): Promise<boolean> {
  const known = await migrator(db).getMigrations();
  return known.every((m) => m.executedAt !== undefined);
}
