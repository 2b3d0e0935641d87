import type { LoggerOptions } from 'pino';

/**
 * Paths pino blanks out. Request bodies are never logged; query strings are cut off by the
 * request serializer (a verification link carries the user code). These catch the headers and
 * any object that a log call might carry by accident.
 */
export const redactedPaths = [
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

export function loggerOptions(level: string): LoggerOptions {
  return {
    level,
    redact: { paths: redactedPaths, censor: '[redacted]' },
    serializers: {
      req(req: LoggedRequest) {
        return {
          id: req.id,
          method: req.method,
          path: req.url?.split('?')[0],
          route: req.routeOptions?.url,
          ip: req.ip,
        };
      },
    },
  };
}
