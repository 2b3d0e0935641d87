/**
 * Seeds an embedded database while no server has it open (PGlite has one owner at a time):
 * `node --import tsx test/bench/seed-embedded.ts DATA_DIR '{"pending":…,"grants":…,"codes":…,"fastCodes":…}'`.
 * Migrates, runs the same set-based SQL as on PostgreSQL, closes.
 */
import { sql } from 'kysely';
import { connectDatabase } from '../../src/db/connect.js';
import { migrateToLatest } from '../../src/db/migrate.js';
import { seed } from './seed.js';

async function main(): Promise<void> {
  const [dataDir, sizeJson] = process.argv.slice(2);
  if (!dataDir || !sizeJson) throw new Error('usage: seed-embedded.ts DATA_DIR SIZE_JSON');
  const size = JSON.parse(sizeJson) as { pending: number; grants: number; codes: number; fastCodes: number };
  const database = await connectDatabase({ dataDir });
  try {
    await migrateToLatest(database.db);
    await seed(
      (statement) =>
        sql
          .raw(statement)
          .execute(database.db)
          .then(() => undefined),
      { pending: 0, grants: 0, codes: 0 },
      size,
      size.fastCodes,
      (line) => process.stderr.write(`  embedded seed: ${line}\n`),
    );
  } finally {
    await database.close();
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`embedded seeding failed: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
