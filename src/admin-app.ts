import { isUtf8 } from 'node:buffer';
import { createHash, timingSafeEqual } from 'node:crypto';
import swagger from '@fastify/swagger';
import Fastify, { type FastifyBaseLogger, type FastifyError, type FastifyInstance } from 'fastify';
import {
  hasZodFastifySchemaValidationErrors,
  jsonSchemaTransform,
  serializerCompiler,
  validatorCompiler,
  type ZodTypeProvider,
} from 'fastify-type-provider-zod';
import type { Logger } from 'pino';
import { ZodError } from 'zod';
import type { Deps } from './deps.js';
import { describeUnavailable, isDatabaseUnavailable } from './db/unavailable.js';
import { loggerOptions } from './lib/logging.js';
import { registerStrictUrl, strictQueryParser } from './http/plugins/strict-input.js';
import { packageVersion } from './lib/paths.js';
import { adminClientRoutes } from './http/admin-routes/clients.js';
import { adminEventRoutes } from './http/admin-routes/events.js';
import { adminGrantRoutes } from './http/admin-routes/grants.js';
import { adminDevicePolicyRoutes } from './http/admin-routes/device-policy.js';
import { adminHousekeepingRoutes } from './http/admin-routes/housekeeping.js';
import { adminKeyRoutes } from './http/admin-routes/keys.js';
import { adminUserRoutes } from './http/admin-routes/users.js';
import { adminWebhookRoutes } from './http/admin-routes/webhooks.js';
import { invalidInput, Problem, sendProblem, unauthorized } from './http/admin-routes/problem.js';
import type { AdminApp } from './http/admin-routes/types.js';

/**
 * Where the admin API is being reached: its Unix socket in the data folder (0600: only the
 * server's own user can connect), its TCP port (anyone who can reach it, so always the token),
 * or the CLI's own process, which runs the admin API on the database when no server is running.
 */
export type AdminListener = 'socket' | 'tcp' | 'in-process';

export interface AdminAppOptions {
  listener: AdminListener;
  /** The process logger; false keeps tests quiet. */
  logger?: Logger | false;
}

const digest = (value: string) => createHash('sha256').update(value).digest();

/**
 * The admin API: a JSON API of its own, on listeners of its own (never the public port), for the
 * CLI and for operators' scripts. Every route is described by its zod schemas, which validate the
 * input, shape the output (nothing a route does not declare goes out) and are the OpenAPI 3.1
 * document at /admin/openapi.json. Errors are RFC 9457 problem details.
 */
export async function buildAdminApp(deps: Deps, options: AdminAppOptions): Promise<FastifyInstance> {
  const logging =
    options.logger === undefined
      ? { logger: loggerOptions(deps.config.logLevel) }
      : options.logger === false
        ? { logger: false }
        : { loggerInstance: options.logger.child({ api: 'admin' }) as FastifyBaseLogger };
  const app = Fastify({
    ...logging,
    bodyLimit: 64 * 1024,
    requestIdHeader: false,
    genReqId: () => crypto.randomUUID(),
    // The public app's strict query parser: bytes that are not UTF-8 are refused, not rewritten.
    routerOptions: { ignoreTrailingSlash: true, querystringParser: strictQueryParser },
    // A path that is not UTF-8 is refused by the router itself, before any hook: a problem too.
    frameworkErrors: (error, _request, reply) => {
      sendProblem(reply, new Problem(400, 'about:blank', 'Bad request', error.message.slice(0, 200)));
    },
  }).withTypeProvider<ZodTypeProvider>();
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);

  // JSON only, and only as UTF-8: invalid bytes are refused rather than read as U+FFFD.
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body, done) => {
    if (!isUtf8(body as Buffer)) return done(invalidInput('the body is not valid UTF-8'), undefined);
    parseJson(request, (body as Buffer).toString('utf8'), done);
  });

  // The token is compared by its SHA-256 digest, in constant time whatever its length.
  const token = deps.config.admin.token;
  const tokenDigest = token === undefined ? null : digest(token);
  const tokenRequired = options.listener === 'tcp' || tokenDigest !== null;
  if (options.listener === 'tcp' && tokenDigest === null) throw new Error('the admin API on TCP needs ADMIN_TOKEN');
  const actor = options.listener === 'tcp' || tokenDigest !== null ? 'admin-token' : 'local-socket';
  // How an operator's change came, as its event records it (events/event-log.ts, Actor).
  const via = options.listener === 'tcp' ? 'token' : options.listener === 'socket' ? 'socket' : 'cli';
  app.addHook('onRequest', (request, reply, done) => {
    request.adminActor = options.listener === 'tcp' ? { kind: 'admin', via, address: request.ip } : { kind: 'admin', via };
    if (tokenRequired) {
      const presented = /^Bearer ([\x21-\x7e]{1,512})$/.exec(request.headers.authorization ?? '')?.[1];
      if (presented === undefined || !timingSafeEqual(digest(presented), tokenDigest!)) {
        reply.header('WWW-Authenticate', 'Bearer realm="device-auth admin"');
        sendProblem(reply, unauthorized());
        return;
      }
    }
    done();
  });

  registerStrictUrl(app as unknown as FastifyInstance);

  // Who changed what: one line per change (and per refused attempt at one), never a secret.
  app.addHook('onResponse', (request, reply, done) => {
    if (request.method !== 'GET' && request.method !== 'HEAD') {
      request.log.info(
        {
          audit: {
            actor,
            via: options.listener,
            remote: options.listener === 'tcp' ? request.ip : options.listener === 'socket' ? 'unix socket' : 'in-process',
            route: `${request.method} ${request.routeOptions.url ?? 'unmatched'}`,
            status: reply.statusCode,
            ...request.audit,
          },
        },
        request.audit ? `admin: ${request.audit.action} ${request.audit.target}` : 'admin: change refused',
      );
    }
    done();
  });

  app.setErrorHandler((error: FastifyError | Problem | ZodError, request, reply) => {
    if (error instanceof Problem) return sendProblem(reply, error);
    if (hasZodFastifySchemaValidationErrors(error)) {
      const errors = error.validation.map((issue) => ({
        path: [error.validationContext, ...issue.instancePath.split('/')].filter(Boolean).join('.'),
        message: issue.message ?? 'invalid',
      }));
      return sendProblem(reply, invalidInput(errors.map((e) => `${e.path}: ${e.message}`).join('; '), errors));
    }
    if (error instanceof ZodError) {
      const errors = error.issues.map((issue) => ({ path: issue.path.join('.'), message: issue.message }));
      return sendProblem(reply, invalidInput(errors.map((e) => `${e.path}: ${e.message}`).join('; '), errors));
    }
    const status = 'statusCode' in error && typeof error.statusCode === 'number' ? error.statusCode : 500;
    if (status >= 400 && status < 500) {
      return sendProblem(reply, new Problem(status, 'about:blank', 'Bad request', error.message || 'the request could not be read'));
    }
    if (isDatabaseUnavailable(error)) {
      request.log.warn(describeUnavailable(error), 'database unavailable');
      reply.header('Retry-After', '1');
      return sendProblem(reply, new Problem(503, 'about:blank', 'Service unavailable', 'the server cannot reach its database; retry shortly'));
    }
    request.log.error({ err: error }, 'unhandled error');
    return sendProblem(reply, new Problem(500, 'about:blank', 'Internal server error', 'the server could not complete the request'));
  });
  app.setNotFoundHandler((request, reply) =>
    sendProblem(reply, new Problem(404, 'about:blank', 'Not found', `no admin route ${request.method} ${request.url.split('?')[0]}: see /admin/openapi.json`)),
  );

  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'device-auth admin API',
        version: packageVersion(),
        description:
          'Clients, users, their devices and apps, events, housekeeping, signing keys, the device policy, the RFC 10027 self-assessment and webhooks. Errors are RFC 9457 problem details.',
      },
      components: { securitySchemes: { adminToken: { type: 'http', scheme: 'bearer' } } },
      security: [{ adminToken: [] }],
    },
    transform: jsonSchemaTransform,
  });

  const routes = app as unknown as AdminApp;
  adminClientRoutes(routes, deps);
  adminUserRoutes(routes, deps);
  adminEventRoutes(routes, deps);
  adminGrantRoutes(routes, deps);
  adminHousekeepingRoutes(routes, deps);
  adminKeyRoutes(routes, deps);
  adminDevicePolicyRoutes(routes, deps);
  adminWebhookRoutes(routes, deps);
  app.get('/admin/openapi.json', { schema: { hide: true } }, async () => app.swagger());

  return app;
}
