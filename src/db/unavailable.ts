/**
 * Whether an error means "the database cannot be reached right now" rather than "this request
 * is wrong" or "our code is wrong": such a request may succeed if retried once the database is
 * back, so it is answered 503, never 500.
 *
 * Two rules. Any failure to OBTAIN a connection is unavailability, whatever the server said
 * (refused, not accepting connections, too many clients, a rotated password, a database renamed
 * away): db/connect.ts tags it as a DatabaseUnavailableError where the connection is made. The
 * same SQLSTATEs raised by a query would be bugs (55000 from a query is a misuse of an object, not
 * an outage), so no growing list of them is kept here. Errors raised mid-session are classified
 * below: the server going away under an open connection.
 */

/** A connection could not be made; `cause` is what the driver or the server said. */
export class DatabaseUnavailableError extends Error {
  readonly code: string | undefined;
  constructor(cause: unknown) {
    const said = describeUnavailable(cause);
    super(`could not connect to the database: ${said.reason}`, { cause });
    this.name = 'DatabaseUnavailableError';
    this.code = said.code;
  }
}

/** SQLSTATEs of a server that ends sessions it had accepted: it is going away. */
const UNAVAILABLE_SQLSTATES = new Set([
  '57P01', // admin_shutdown: pg_ctl stop -m fast, or an administrator terminated the backend
  '57P02', // crash_shutdown: another backend crashed, or pg_ctl stop -m immediate
]);
/** Class 08: connection exception (08000, 08003, 08006, 08001, 08004, ...). */
const CONNECTION_EXCEPTION_CLASS = '08';

/** Node's socket errors on the way to the database. */
const SOCKET_ERRORS = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN']);

/**
 * node-postgres and pg-pool report a lost or unobtainable connection with a plain Error and no
 * code; these are their exact messages (pg/lib/client.js, pg-pool/index.js).
 */
const DRIVER_MESSAGES = new Set([
  'Connection terminated unexpectedly',
  'Connection terminated',
  'Connection terminated due to connection timeout',
  'timeout exceeded when trying to connect',
  'Client has encountered a connection error and is not queryable',
]);

/** Server messages name the database and role; a log line carries at most this much of one. */
const MAX_REASON_LENGTH = 200;
const MAX_CODE_LENGTH = 16;

const MAX_DEPTH = 5;

export function isDatabaseUnavailable(error: unknown, depth = 0): boolean {
  if (!(error instanceof Error) || depth > MAX_DEPTH) return false;
  if (error instanceof DatabaseUnavailableError) return true;
  const { code, syscall } = error as Error & { code?: unknown; syscall?: unknown };
  if (typeof code === 'string') {
    if (UNAVAILABLE_SQLSTATES.has(code) || (code.length === 5 && code.startsWith(CONNECTION_EXCEPTION_CLASS))) return true;
    if (SOCKET_ERRORS.has(code)) return true;
    // A Unix socket that is not there (ENOENT) while the server is down.
    if (syscall === 'connect') return true;
  }
  if (DRIVER_MESSAGES.has(error.message)) return true;
  // Node reports a refused connection to several addresses as an AggregateError of the attempts.
  if (error instanceof AggregateError && error.errors.some((inner) => isDatabaseUnavailable(inner, depth + 1))) return true;
  return isDatabaseUnavailable(error.cause, depth + 1);
}

/**
 * What a log line says of an unavailable database, bounded, without a stack: an outage logs one
 * line per request or tick, and the stack of a refused connection says nothing new.
 */
export function describeUnavailable(error: unknown): { reason: string; code: string | undefined } {
  if (!(error instanceof Error)) return { reason: String(error).slice(0, MAX_REASON_LENGTH), code: undefined };
  const { code } = error as Error & { code?: unknown };
  // Node reports a refusal by several addresses as an AggregateError with an empty message.
  const first = error instanceof AggregateError ? (error.errors[0] as unknown) : undefined;
  const reason = error.message || (first instanceof Error ? first.message : '') || error.name;
  const ownCode = typeof code === 'string' ? code : first instanceof Error ? (first as Error & { code?: unknown }).code : undefined;
  return { reason: reason.slice(0, MAX_REASON_LENGTH), code: typeof ownCode === 'string' ? ownCode.slice(0, MAX_CODE_LENGTH) : undefined };
}
