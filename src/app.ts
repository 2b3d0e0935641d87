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
import { registerCsrfCheck } from './http/plugins/csrf.js';
import { registerSessions } from './http/plugins/session.js';
import { activateRoutes } from './http/page-routes/activate.js';
import { signInRoutes } from './http/page-routes/sign-in.js';
import { deviceAuthorizationRoutes } from './http/oauth-routes/device-authorization.js';
import { discoveryRoutes } from './http/oauth-routes/discovery.js';
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
  userinfoRoutes(app, deps);

  // Pages get browser sessions and the CSRF check; OAuth endpoints never see a cookie.
  await app.register(async (pages) => {
    registerSessions(pages, deps);
    registerCsrfCheck(pages);
    signInRoutes(pages, deps);
    activateRoutes(pages, deps);
  });

  return app;
}
