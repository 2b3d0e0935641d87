/**
 * One side of `npm run bench:ab`: migrates and seeds a database with a checkout's own migrations
 * and seed (test/bench/seed.ts), so that each side runs on the schema and data it was written for.
 *
 * usage: node --import tsx test/bench/ab-prepare.ts CHECKOUT DATABASE_URL ROWS CONNECTIONS
 * CHECKOUT may be another commit's checkout: its modules are loaded from there.
 */
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const [checkout, databaseUrl, rowsText, connectionsText] = process.argv.slice(2);
if (!checkout || !databaseUrl || !rowsText || !connectionsText) throw new Error('usage: ab-prepare.ts CHECKOUT DATABASE_URL ROWS CONNECTIONS');
const rows = Number(rowsText);
const from = (file: string) => import(pathToFileURL(path.join(checkout, file)).href);

const { connectDatabase } = await from('src/db/connect.ts');
const { migrateToLatest } = await from('src/db/migrate.ts');
const { seed } = await from('test/bench/seed.ts');
const { sql } = await import('kysely');

const handle = await connectDatabase({ databaseUrl, dataDir: 'unused', poolSize: 2 });
try {
  await migrateToLatest(handle.db);
  const execute = (statement: string) =>
    sql
      .raw(statement)
      .execute(handle.db)
      .then(() => undefined);
  await seed(execute, { pending: 0, grants: 0, codes: 0 }, { pending: rows, grants: rows, codes: 0 }, Number(connectionsText), () => {}, 2);
  await sql`VACUUM ANALYZE`.execute(handle.db);
} finally {
  await handle.close();
}
