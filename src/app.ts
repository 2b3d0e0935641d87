import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import cookie from '@fastify/cookie';
import formbody from '@fastify/formbody';
import view from '@fastify/view';
import { Eta } from 'eta';
import Fastify, { type FastifyInstance } from 'fastify';
import type { Deps } from './deps.js';
import { loggerOptions } from './lib/logging.js';
import { registerErrorHandler } from './http/plugins/error-handler.js';
import { registerSecurityHeaders } from './http/plugins/security-headers.js';
import { deviceAuthorizationRoutes } from './http/oauth-routes/device-authorization.js';
import { discoveryRoutes } from './http/oauth-routes/discovery.js';
import { introspectRoutes } from './http/oauth-routes/introspect.js';
import { revokeRoutes } from './http/oauth-routes/revoke.js';
import { tokenRoutes } from './http/oauth-routes/token.js';
import { userinfoRoutes } from './http/oauth-routes/userinfo.js';

export const viewsFolder = fileURLToPath(new URL('../views', import.meta.url));
const stylesheet = readFileSync(fileURLToPath(new URL('../views/static/style.css', import.meta.url)), 'utf8');

export interface AppOptions {
  /** Pass false to keep tests quiet; a pino instance or options otherwise. */
  logger?: boolean | object;
}

/** Builds the whole HTTP application; never listens (server.ts does, tests inject). */
export async function buildApp(deps: Deps, options: AppOptions = {}): Promise<FastifyInstance> {
  const app = Fastify({
    logger: options.logger ?? loggerOptions(deps.config.logLevel),
    trustProxy: true,
    bodyLimit: 64 * 1024,
    requestIdHeader: false,
    genReqId: () => crypto.randomUUID(),
    routerOptions: { ignoreTrailingSlash: true },
  });

  await app.register(formbody);
  await app.register(cookie);
  await app.register(view, {
    engine: { eta: new Eta({ views: viewsFolder, cache: true, autoEscape: true }) },
    templates: viewsFolder,
    defaultContext: { issuer: deps.config.issuer },
  });
  registerErrorHandler(app);
  registerSecurityHeaders(app);

  app.get('/static/style.css', async (_request, reply) =>
    reply.type('text/css; charset=utf-8').header('Cache-Control', 'public, max-age=3600').send(stylesheet),
  );

  discoveryRoutes(app, deps);
  deviceAuthorizationRoutes(app, deps);
  tokenRoutes(app, deps);
  revokeRoutes(app, deps);
  introspectRoutes(app, deps);
  userinfoRoutes(app, deps);

  return app;
}
