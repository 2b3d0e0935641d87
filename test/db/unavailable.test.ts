import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectDatabase } from '../../src/db/connect.js';
import { isDatabaseUnavailable } from '../../src/db/unavailable.js';
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
    ['57P03 cannot_connect_now (starting up)', serverError('57P03', 'the database system is starting up')],
    ['08006 connection_failure', serverError('08006', 'connection failure')],
    ['08001 sqlclient_unable_to_establish_sqlconnection', serverError('08001', 'could not connect')],
    ['53300 too_many_connections', serverError('53300', 'sorry, too many clients already')],
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
        const error = await handle.db.selectFrom('users').select('user_id').execute().catch((e: unknown) => e);
        expect(isDatabaseUnavailable(error)).toBe(true);
      } finally {
        await handle.close();
      }
    });

    it('a constraint violation on the test database is not', async () => {
      const insert = () =>
        database.handle.db.insertInto('server_secrets').values({ name: 'duplicate-check', value: new Uint8Array([1]) }).execute();
      await insert();
      const error = await insert().catch((e: unknown) => e);
      expect(error).toBeInstanceOf(Error);
      expect(isDatabaseUnavailable(error)).toBe(false);
    });
  });
});
