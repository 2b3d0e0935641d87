import { CompiledQuery, type Kysely, type QueryResult, type RawBuilder } from 'kysely';
import type { DirectQuery } from './prepared-statements.js';

/**
 * Root databases whose compiled statements may skip Kysely's connection handling: a statement
 * outside a transaction goes straight to the pg pool (db/prepared-statements.ts, directQuery).
 * Kysely borrows and returns a pool connection through several layers of promises per query;
 * the pool does it in one (a microbenchmark of one prepared SELECT: about 38 against 32 µs of
 * CPU per query). Transactions are separate Kysely instances, never registered here, so their
 * statements keep to the transaction's connection. The embedded database has no pool and is not
 * registered: its one connection is lent to one borrower at a time through the dialect.
 */
const directQueries = new WeakMap<Kysely<any>, DirectQuery>();

export function runCompiledStatementsDirectly(db: Kysely<any>, query: DirectQuery): void {
  directQueries.set(db, query);
}

/** Stands for one named parameter while the template is compiled. */
class Slot {
  constructor(readonly name: string) {}
}

/**
 * A hot statement written as a Kysely `sql` template but compiled once, on its first call, rather
 * than on every call: each call only binds its values. Kysely otherwise builds and compiles the
 * template's operation tree per request (a few percent of a poll's server CPU), and the compiled
 * text, being the same string object every time, is looked up in the prepared-statement names
 * without being hashed again.
 *
 * The template reads its parameters by name from `p` (`${p.device_code_hash}`); a name may be used
 * more than once. It must not branch on them: they are placeholders when it runs.
 */
export function compiledOnce<Row, Params extends object>(
  template: (p: Params) => RawBuilder<Row>,
): (db: Kysely<any>, params: Params) => Promise<QueryResult<Row>> {
  let compiled: { sql: string; slots: Array<string | { constant: unknown }> } | undefined;
  const placeholders = new Proxy({} as Params, {
    get: (_target, name) => (typeof name === 'string' ? new Slot(name) : undefined),
  });
  return (db, params) => {
    if (!compiled) {
      const query = template(placeholders).compile(db);
      compiled = {
        sql: query.sql,
        slots: query.parameters.map((value) => (value instanceof Slot ? value.name : { constant: value })),
      };
    }
    const parameters = compiled.slots.map((slot) => (typeof slot === 'string' ? (params as Record<string, unknown>)[slot] : slot.constant));
    const direct = directQueries.get(db);
    if (direct) return direct(compiled.sql, parameters) as Promise<QueryResult<Row>>;
    return db.executeQuery(CompiledQuery.raw(compiled.sql, parameters)) as Promise<QueryResult<Row>>;
  };
}
