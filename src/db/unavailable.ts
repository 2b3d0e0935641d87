/**
 * Whether an error means "the database cannot be reached right now" rather than "this request
 * is wrong" or "our code is wrong": such a request may succeed if retried once the database is
 * back, so it is answered 503, never 500.
 */

/** SQLSTATEs of a server that is going away or not yet (back) up, and of too many connections. */
const UNAVAILABLE_SQLSTATES = new Set([
  '57P01', // admin_shutdown: pg_ctl stop -m fast, or an administrator terminated the backend
  '57P02', // crash_shutdown: another backend crashed, or pg_ctl stop -m immediate
  '57P03', // cannot_connect_now: the server is starting up or shutting down
  '53300', // too_many_connections
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

const MAX_DEPTH = 5;

export function isDatabaseUnavailable(error: unknown, depth = 0): boolean {
  if (!(error instanceof Error) || depth > MAX_DEPTH) return false;
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
