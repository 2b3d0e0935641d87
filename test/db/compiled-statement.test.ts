import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compiledOnce } from '../../src/db/compiled-statement.js';
import { createTestDatabase, type TestDatabase } from '../helpers/database.js';

describe('compiledOnce: a sql template compiled on its first call, bound on every call', () => {
  let database: TestDatabase;
  beforeAll(async () => {
    database = await createTestDatabase();
  });
  afterAll(() => database.drop());

  const fragment = (p: { n: number }) => sql`${p.n}::int * 10`;
  const statement = compiledOnce(
    (p: { n: number; label: string; at: Date }) =>
      sql<{ twice: number; label: string; tenfold: number; constant: number; at: Date }>`
      SELECT ${p.n}::int + ${p.n}::int AS twice, ${p.label}::text AS label, ${fragment(p)} AS tenfold,
             ${7}::int AS constant, ${p.at}::timestamptz AS at`,
  );

  it('binds each call’s own values, a name used twice or inside a fragment included, and keeps constants', async () => {
    const db = database.handle.db;
    const first = new Date('2026-01-02T03:04:05Z');
    const second = new Date('2027-06-07T08:09:10Z');
    expect((await statement(db, { n: 1, label: 'one', at: first })).rows).toEqual([{ twice: 2, label: 'one', tenfold: 10, constant: 7, at: first }]);
    expect((await statement(db, { n: 21, label: 'two', at: second })).rows).toEqual([{ twice: 42, label: 'two', tenfold: 210, constant: 7, at: second }]);
  });

  it('runs inside a transaction, on the transaction’s connection', async () => {
    const seen = await database.handle.db.transaction().execute(async (trx) => {
      await sql`CREATE TEMPORARY TABLE compiled_once_probe (n int) ON COMMIT DROP`.execute(trx);
      const insert = compiledOnce((p: { n: number }) => sql<{ n: number }>`INSERT INTO compiled_once_probe VALUES (${p.n}) RETURNING n`);
      await insert(trx, { n: 5 });
      return (await sql<{ n: number }>`SELECT n FROM compiled_once_probe`.execute(trx)).rows;
    });
    expect(seen).toEqual([{ n: 5 }]);
  });
});
