import { sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compiledOnce } from '../../src/db/compiled-statement.js';
import { connectDatabase, type Database } from '../../src/db/connect.js';
import { DatabaseUnavailableError, describeUnavailable, isDatabaseUnavailable } from '../../src/db/unavailable.js';
import { createTestDatabase, type TestDatabase } from '../helpers/database.js';
import { freePort } from '../helpers/server-process.js';

/** A server error as node-postgres builds it from the wire. */
function serverError(code: string, message: string): pg.DatabaseError {
  const error = new pg.DatabaseError(message, message.length, 'error');
  error.code = code;
  return error;
}

const systemError = (code: string, syscall = 'connect') => Object.assign(new Error(`${syscall} ${code} 127.0.0.1:5432`), { code, syscall });

describe('isDatabaseUnavailable: 503 for a database that is away, never for a request or a bug', () => {
  it.each([
    ['57P01 admin_shutdown (pg_ctl stop -m fast)', serverError('57P01', 'terminating connection due to administrator command')],
    ['57P02 crash_shutdown', serverError('57P02', 'terminating connection because of crash of another server process')],
    ['08006 connection_failure', serverError('08006', 'connection failure')],
    ['08001 sqlclient_unable_to_establish_sqlconnection', serverError('08001', 'could not connect')],
    ['while connecting: 57P03 cannot_connect_now (starting up)', new DatabaseUnavailableError(serverError('57P03', 'the database system is starting up'))],
    ['while connecting: 53300 too_many_connections', new DatabaseUnavailableError(serverError('53300', 'sorry, too many clients already'))],
    [
      'while connecting: 55000 not accepting connections',
      new DatabaseUnavailableError(serverError('55000', 'database "x" is not currently accepting connections')),
    ],
    ['while connecting: 28P01 password rotated', new DatabaseUnavailableError(serverError('28P01', 'password authentication failed for user "app"'))],
    ['while connecting: 3D000 database missing', new DatabaseUnavailableError(serverError('3D000', 'database "x" does not exist'))],
    [
      'pg-pool: its connection timeout around a failed connect',
      new Error('Connection terminated due to connection timeout', { cause: new DatabaseUnavailableError(new Error('timeout expired')) }),
    ],
    ['ECONNREFUSED', systemError('ECONNREFUSED')],
    ['ECONNRESET on a read', systemError('ECONNRESET', 'read')],
    ['ENOENT of a missing Unix socket', systemError('ENOENT')],
    ['pg: Connection terminated unexpectedly', new Error('Connection terminated unexpectedly')],
    ['pg-pool: timeout exceeded when trying to connect', new Error('timeout exceeded when trying to connect')],
    ['pg: a client whose connection broke', new Error('Client has encountered a connection error and is not queryable')],
    ['a refusal by every address (AggregateError)', new AggregateError([systemError('ECONNREFUSED'), systemError('ECONNREFUSED')], 'connect failed')],
    ['a wrapped cause', new Error('query failed', { cause: systemError('ECONNREFUSED') })],
  ])('%s -> unavailable', (_name, error) => {
    expect(isDatabaseUnavailable(error)).toBe(true);
  });

  it.each([
    ['23505 unique_violation', serverError('23505', 'duplicate key value violates unique constraint')],
    ['42601 syntax_error', serverError('42601', 'syntax error at or near "SELEC"')],
    ['40001 serialization_failure', serverError('40001', 'could not serialize access')],
    ['57014 query_canceled', serverError('57014', 'canceling statement due to statement timeout')],
    // Raised by a query rather than by a connection attempt, these are bugs.
    ['55000 object_not_in_prerequisite_state from a query', serverError('55000', 'currval of sequence "s" is not yet defined in this session')],
    ['3D000 from a query', serverError('3D000', 'database "other" does not exist')],
    ['ENOENT of a file', systemError('ENOENT', 'open')],
    ['a TypeError', new TypeError("Cannot read properties of undefined (reading 'x')")],
    ['not an Error', { code: 'ECONNREFUSED' }],
  ])('%s -> not unavailable', (_name, error) => {
    expect(isDatabaseUnavailable(error)).toBe(false);
  });

  describe('errors as they really happen', () => {
    let database: TestDatabase;
    beforeAll(async () => {
      database = await createTestDatabase();
    });
    afterAll(() => database.drop());

    it('a pool pointed at a loopback port where nothing listens fails with an unavailable error', async () => {
      const handle = await connectDatabase({ databaseUrl: `postgres://postgres@127.0.0.1:${await freePort()}/none`, dataDir: 'unused' });
      try {
        const error = await handle.db
          .selectFrom('users')
          .select('user_id')
          .execute()
          .catch((e: unknown) => e);
        expect(isDatabaseUnavailable(error)).toBe(true);
      } finally {
        await handle.close();
      }
    });

    const selectOne = compiledOnce(() => sql<{ one: number }>`SELECT 1 AS one`);
    it.each([
      ['Kysely on the plain pool', false, (db: Database) => sql`SELECT 1`.execute(db)],
      ['Kysely on the preparing pool', true, (db: Database) => db.selectFrom('users').select('user_id').where('email', '=', 'a@example.test').execute()],
      ['a compiled statement on the pool directly (pool.query)', true, (db: Database) => selectOne(db, {})],
    ])('%s: a failure to connect is a DatabaseUnavailableError carrying what the driver said', async (_name, preparedStatements, run) => {
      const handle = await connectDatabase({ databaseUrl: `postgres://postgres@127.0.0.1:${await freePort()}/none`, dataDir: 'unused', preparedStatements });
      try {
        const error = await run(handle.db).catch((e: unknown) => e);
        expect(error).toBeInstanceOf(DatabaseUnavailableError);
        expect(describeUnavailable(error)).toEqual({ reason: expect.stringContaining('ECONNREFUSED'), code: 'ECONNREFUSED' });
      } finally {
        await handle.close();
      }
    });

    it('a constraint violation on the test database is not', async () => {
      const insert = () =>
        database.handle.db
          .insertInto('server_secrets')
          .values({ name: 'duplicate-check', value: new Uint8Array([1]) })
          .execute();
      await insert();
      const error = await insert().catch((e: unknown) => e);
      expect(error).toBeInstanceOf(Error);
      expect(isDatabaseUnavailable(error)).toBe(false);
    });
  });
});

describe('describeUnavailable: what a log line says, bounded', () => {
  it('cuts a long server message to 200 characters and a code to 16', () => {
    const error = Object.assign(new Error('x'.repeat(10_000)), { code: 'Y'.repeat(100) });
    const said = describeUnavailable(new DatabaseUnavailableError(error));
    expect([said.reason.length, said.code?.length]).toEqual([200, 16]);
  });

  it('names the first attempt of a refusal by every address (an AggregateError has no message)', () => {
    expect(describeUnavailable(new AggregateError([systemError('ECONNREFUSED')], ''))).toEqual({
      reason: 'connect ECONNREFUSED 127.0.0.1:5432',
      code: 'ECONNREFUSED',
    });
  });
});
