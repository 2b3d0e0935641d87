import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compiledOnce } from '../../src/db/compiled-statement.js';
import { connectDatabase, type DatabaseHandle } from '../../src/db/connect.js';
import { preparingPool } from '../../src/db/prepared-statements.js';
import type { DB } from '../../src/db/schema.js';
import { createTestDatabase, type TestDatabase } from '../helpers/database.js';

const onPostgres = Boolean(process.env.TEST_DATABASE_URL);

/** Named statements prepared on the one connection of a one-connection pool. */
async function preparedOn(handle: DatabaseHandle): Promise<string[]> {
  const { rows } = await sql<{ name: string }>`SELECT name FROM pg_prepared_statements ORDER BY name`.execute(handle.db);
  return rows.map((row) => row.name);
}

describe.skipIf(!onPostgres)('prepared statements on PostgreSQL (the embedded database has no connections to prepare on)', () => {
  let database: TestDatabase;
  const handles: DatabaseHandle[] = [];
  const open = async (preparedStatements?: boolean) => {
    const handle = await connectDatabase({ databaseUrl: database.url!, dataDir: 'unused', poolSize: 1, preparedStatements });
    handles.push(handle);
    return handle;
  };

  beforeAll(async () => {
    database = await createTestDatabase();
  });
  afterAll(async () => {
    for (const handle of handles) await handle.close();
    await database.drop();
  });

  it('a statement with parameters is prepared once per connection and reused, whatever its values', async () => {
    const handle = await open();
    for (const id of ['a', 'b', 'c']) {
      await handle.db.selectFrom('clients').select('client_id').where('client_id', '=', id).execute();
    }
    const names = await preparedOn(handle);
    expect(names).toHaveLength(1);
    const { rows } = await sql<{ statement: string }>`SELECT statement FROM pg_prepared_statements`.execute(handle.db);
    expect(rows[0]!.statement).toMatch(/from "clients" where "client_id" = \$1/);
  });

  it('a statement without parameters (BEGIN, COMMIT, DDL) is not prepared', async () => {
    const handle = await open();
    await handle.db.transaction().execute(async (trx) => {
      await sql`SELECT 1`.execute(trx);
    });
    expect(await preparedOn(handle)).toEqual([]);
  });

  it('an aborted transaction still rolls back, and the connection goes on serving prepared statements', async () => {
    const handle = await open();
    const lookUp = () => handle.db.selectFrom('clients').select('client_id').where('client_id', '=', 'nobody').execute();
    await lookUp();
    await expect(
      handle.db.transaction().execute(async (trx) => {
        await sql`SELECT ${'not a number'}::integer`.execute(trx);
      }),
    ).rejects.toThrow(/invalid input syntax/);
    await expect(lookUp()).resolves.toEqual([]);
  });

  it('past the bound on distinct texts, new texts run unnamed: no connection caches statements without end', async () => {
    const pool = new pg.Pool({ connectionString: database.url!, max: 1 });
    const bounded = new Kysely<DB>({ dialect: new PostgresDialect({ pool: preparingPool(pool, 2) }) });
    try {
      for (const column of ['client_id', 'name', 'kind', 'type'] as const) {
        await bounded.selectFrom('clients').select(column).where('client_id', '=', 'x').execute();
      }
      const { rows } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_prepared_statements`.execute(bounded);
      expect(rows[0]!.n).toBe(2);
    } finally {
      await bounded.destroy();
    }
  });

  it('with DATABASE_PREPARED_STATEMENTS=false nothing is prepared (for poolers that cannot carry them)', async () => {
    const handle = await open(false);
    await handle.db.selectFrom('clients').select('client_id').where('client_id', '=', 'x').execute();
    await hotLookUp(handle.db, { id: 'x' });
    expect(await preparedOn(handle)).toEqual([]);
  });

  const hotLookUp = compiledOnce((p: { id: string }) => sql<{ client_id: string }>`SELECT client_id FROM clients WHERE client_id = ${p.id}`);

  it('a hot (compiled) statement outside a transaction goes to the pool directly, prepared once under a name of its own', async () => {
    const handle = await open();
    for (const id of ['a', 'b', 'c']) expect((await hotLookUp(handle.db, { id })).rows).toEqual([]);
    // dq_: the direct path's names; Kysely's connection handling would have named it da_.
    expect(await preparedOn(handle)).toEqual(['dq_0']);
    // In a transaction it runs on the transaction's connection, through Kysely.
    await handle.db.transaction().execute((trx) => hotLookUp(trx, { id: 'd' }));
    expect(await preparedOn(handle)).toEqual(['da_0', 'dq_0']);
  });
});
