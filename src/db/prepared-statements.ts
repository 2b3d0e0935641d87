import type { PostgresCursor, PostgresPool, PostgresPoolClient, PostgresQueryResult } from 'kysely';
import type pg from 'pg';

/**
 * Gives every distinct parameterised statement text a name, so that pg prepares it once per
 * connection and PostgreSQL parses and plans it once, not on every request. On the hot paths
 * (poll, refresh, introspection) planning a multi-CTE statement cost more than running it: with
 * pgbench, a refresh rotation went from ~1,600 to ~4,700 statements/s once prepared.
 *
 * Kysely's SQL text is the same string for the same query shape, with values as parameters, so
 * the application has a few dozen texts. `maxStatements` bounds the names anyway: a text built
 * from input (an IN list of varying length, say) must not grow every connection's statement cache
 * without end, so past the bound new texts run unnamed, as before.
 *
 * Statements without parameters (BEGIN, COMMIT, ROLLBACK, DDL in migrations) stay unnamed: there is
 * nothing to plan twice, and an aborted transaction must always be able to run ROLLBACK.
 *
 * Off (DATABASE_PREPARED_STATEMENTS=false) for poolers that cannot carry named statements across
 * server connections, such as PgBouncer in transaction mode before 1.21.
 */
export function preparingPool(pool: pg.Pool, maxStatements = 500): PostgresPool {
  const nameOf = statementNames(maxStatements);
  // Kysely keeps its connection object per client it is given, so each pg client keeps one wrapper.
  const wrappers = new WeakMap<pg.PoolClient, PostgresPoolClient>();
  const wrap = (client: pg.PoolClient): PostgresPoolClient => {
    function query<R>(sql: string, parameters: ReadonlyArray<unknown>): Promise<PostgresQueryResult<R>>;
    function query<R>(cursor: PostgresCursor<R>): PostgresCursor<R>;
    function query(
      textOrCursor: string | PostgresCursor<unknown>,
      parameters?: ReadonlyArray<unknown>,
    ): Promise<PostgresQueryResult<unknown>> | PostgresCursor<unknown> {
      // Kysely passes a cursor only when its dialect is given one; ours is not.
      if (typeof textOrCursor !== 'string') throw new Error('cursors are not supported');
      const values = parameters ? [...parameters] : [];
      const name = values.length > 0 ? nameOf(textOrCursor) : undefined;
      const result = name === undefined ? client.query(textOrCursor, values) : client.query({ name, text: textOrCursor, values });
      return result as Promise<PostgresQueryResult<unknown>>;
    }
    return { query, release: () => client.release() };
  };
  return {
    async connect() {
      const client = await pool.connect();
      let wrapper = wrappers.get(client);
      if (!wrapper) {
        wrapper = wrap(client);
        wrappers.set(client, wrapper);
      }
      return wrapper;
    },
    end: () => pool.end(),
  };
}

/** Names for distinct statement texts, `da_0`, `da_1`, …; undefined past the bound. */
function statementNames(maxStatements: number): (text: string) => string | undefined {
  const names = new Map<string, string>();
  return (text) => {
    let name = names.get(text);
    if (name === undefined && names.size < maxStatements) {
      name = `da_${names.size}`;
      names.set(text, name);
    }
    return name;
  };
}

/**
 * One statement on a connection of the pool's choosing, as pool.query runs it (it borrows a
 * connection and gives it back): the path of a hot statement outside a transaction
 * (db/compiled-statement.ts). Named as preparingPool names statements, in a namespace of its own
 * (`dq_`), or unnamed when prepared statements are off.
 */
export function directQuery(pool: pg.Pool, prepared: boolean, maxStatements = 500): DirectQuery {
  const nameOf = statementNames(maxStatements);
  return async (text, parameters) => {
    const name = prepared ? nameOf(text) : undefined;
    // A Date as ISO 8601 in UTC, which timestamptz reads exactly: pg's own conversion formats it
    // field by field in the local time zone (1% of code issuance's server CPU).
    const values = parameters.map((value) => (value instanceof Date ? value.toISOString() : value));
    const result = await pool.query(name === undefined ? { text, values } : { name: `dq_${name.slice(3)}`, text, values });
    return { rows: result.rows };
  };
}

export type DirectQuery = (text: string, values: unknown[]) => Promise<{ rows: any[] }>;
