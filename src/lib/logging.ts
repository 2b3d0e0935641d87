import { writeSync } from 'node:fs';
import type { LoggerOptions } from 'pino';

/**
 * Paths pino blanks out. Request bodies are never logged; query strings are cut off by the
 * request serializer (a verification link carries the user code). These catch the headers and
 * any object that a log call might carry by accident.
 */
const redactedPaths = [
  'req.headers.authorization',
  'req.headers.cookie',
  'res.headers["set-cookie"]',
  '*.password',
  '*.client_secret',
  '*.device_code',
  '*.user_code',
  '*.access_token',
  '*.refresh_token',
  '*.id_token',
  '*.token',
];

interface LoggedRequest {
  id?: string;
  method?: string;
  url?: string;
  ip?: string;
  routeOptions?: { url?: string };
}

/** A path is logged on every request: an attacker's long one must not make every line huge. */
const MAX_LOGGED_PATH_LENGTH = 256;

export function loggerOptions(level: string): LoggerOptions {
  return {
    level,
    redact: { paths: redactedPaths, censor: '[redacted]' },
    serializers: {
      req(req: LoggedRequest) {
        return {
          id: req.id,
          method: req.method,
          path: req.url?.split('?')[0]?.slice(0, MAX_LOGGED_PATH_LENGTH),
          route: req.routeOptions?.url,
          ip: req.ip,
        };
      },
    },
  };
}

/** Where the process's log lines go: a file descriptor that may turn into a dead pipe at any moment. */
export interface LogDestination {
  write(line: string): void;
  /** True once a write failed for good; nothing is written from then on. */
  readonly broken: boolean;
  /** Lines dropped because the reader was not keeping up (EAGAIN) or had gone away. */
  readonly dropped: number;
}

/**
 * pino's own stdout stream (sonic-boom) writes asynchronously and flushes what is left
 * synchronously at process exit, retrying a failed write forever: once the reader of a pipe is
 * gone (`npm start | tee log`, tee killed by Ctrl-C), exit spins in that loop, the event loop never
 * runs again and not even SIGTERM ends the process. These writes are synchronous (nothing is
 * left to flush at exit) and a failure never throws: a full non-blocking pipe loses the line, any
 * other error (EPIPE, EBADF, EIO...) silences logging for the rest of the process, which keeps
 * serving.
 */
export function logDestination(fd: number): LogDestination {
  let broken = false;
  let dropped = 0;
  return {
    write(line: string) {
      if (broken) {
        dropped++;
        return;
      }
      try {
        let rest = Buffer.from(line, 'utf8');
        while (rest.length > 0) rest = rest.subarray(writeSync(fd, rest));
      } catch (error) {
        dropped++;
        if ((error as NodeJS.ErrnoException).code !== 'EAGAIN') broken = true;
      }
    },
    get broken() {
      return broken;
    },
    get dropped() {
      return dropped;
    },
  };
}
