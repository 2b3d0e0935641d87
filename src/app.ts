import { readFileSync } from 'node:fs';
import path from 'node:path';
import cookie from '@fastify/cookie';
import view from '@fastify/view';
import { Eta } from 'eta';
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { Deps } from './deps.js';
import { loggerOptions } from './lib/logging.js';
import { viewsFolder } from './lib/paths.js';
import { pageCatalogues } from './http/page-language.js';
import { healthRoutes } from './http/health-routes.js';
import { readServiceLogo } from './http/service-logo.js';
import { GEO_DATA_CREDITS } from './geo/locate.js';
import { iconRoutes } from './http/icon-routes.js';
import { metricsRoutes, requestDurationRecorder } from './http/metrics-routes.js';
import { registerErrorHandler } from './http/plugins/error-handler.js';
import { securityHeaders } from './http/plugins/security-headers.js';
import { registerSecretsNotInUrl } from './http/plugins/secrets-not-in-url.js';
import { registerUntrustedForwardingWatch } from './http/plugins/untrusted-forwarding.js';
import { registerStrictInput, strictQueryParser } from './http/plugins/strict-input.js';
import { registerCsrfCheck } from './http/plugins/csrf.js';
import { registerSessions } from './http/plugins/session.js';
import { authorizeRoutes } from './http/page-routes/authorize.js';
import { endSessionFormRoute, endSessionRoutes } from './http/page-routes/end-session.js';
import { accountRoutes } from './http/page-routes/account.js';
import { activateRoutes } from './http/page-routes/activate.js';
import { homeRoutes } from './http/page-routes/home.js';
import { signInRoutes } from './http/page-routes/sign-in.js';
import { deviceAuthorizationRoutes } from './http/oauth-routes/device-authorization.js';
import { discoveryRoutes } from './http/oauth-routes/discovery.js';
import { introspectRoutes } from './http/oauth-routes/introspect.js';
import { revokeRoutes } from './http/oauth-routes/revoke.js';
import { tokenRoutes } from './http/oauth-routes/token.js';
import { userinfoRoutes } from './http/oauth-routes/userinfo.js';
import { ssfRoutes } from './http/ssf-routes.js';

const stylesheet = readFileSync(path.join(viewsFolder, 'static', 'style.css'), 'utf8');

export interface AppOptions {
  /** The process logger; false keeps tests quiet; absent builds one from the configuration. */
  logger?: Logger | false;
}

/**
 * What every answer gets on its way out, in one synchronous onSend hook: the security headers, the
 * request-duration metric, and on close `Connection: close`, so that keep-alive sockets end with
 * the answers still in flight instead of holding the shutdown open for the keep-alive timeout.
 * One hook, and no onResponse hook: fastify runs each kind of hook through a runner of closures
 * per request, and taking the duration out of an onResponse hook gave the poll about 5 % of its
 * server CPU back (docs/benchmarks.md, 2026-11-27 (afternoon)); an async hook would add a promise
 * and a trip through the microtask queue.
 */
function registerAnswerFinishing(app: FastifyInstance, deps: Deps): void {
  let closing = false;
  app.addHook('preClose', async () => {
    closing = true;
  });
  const addSecurityHeaders = securityHeaders(deps.config.issuer);
  const recordDuration = requestDurationRecorder(deps.metrics);
  app.addHook('onSend', (request, reply, payload, done) => {
    addSecurityHeaders(reply);
    if (closing) reply.header('Connection', 'close');
    recordDuration(request, reply);
    done(null, payload);
  });
}

/**
 * Issue 28 §2: a client that sends its headers and then stalls (or trickles) is cut off, and the
 * number of sockets is capped, so that stalled connections cannot take every descriptor. Node
 * checks the header and request timeouts every `connectionsCheckingInterval`, so that interval is
 * a fraction of the shortest of them.
 */
function connectionLimits(http: Deps['config']['http']) {
  const headersTimeout = http.headersTimeoutSeconds * 1000;
  const requestTimeout = http.requestTimeoutSeconds * 1000;
  return {
    http: { headersTimeout, requestTimeout, connectionsCheckingInterval: Math.max(100, Math.min(1000, Math.floor(headersTimeout / 4))) },
    requestTimeout,
    keepAliveTimeout: http.keepAliveTimeoutSeconds * 1000,
    maxRequestsPerSocket: http.maxRequestsPerSocket,
  };
}

/** Builds the whole HTTP application; never listens (server.ts does, tests inject). */
export async function buildApp(deps: Deps, options: AppOptions = {}): Promise<FastifyInstance> {
  const logging =
    options.logger === undefined
      ? { logger: loggerOptions(deps.config.logLevel) }
      : options.logger === false
        ? { logger: false }
        : { loggerInstance: options.logger as FastifyBaseLogger };
  const app = Fastify({
    ...logging,
    // Client IPs feed rate limits and audit events: forwarded headers count only from trusted proxies.
    trustProxy: deps.config.trustProxy,
    bodyLimit: 64 * 1024,
    ...connectionLimits(deps.config.http),
    requestIdHeader: false,
    genReqId: () => crypto.randomUUID(),
    routerOptions: { ignoreTrailingSlash: true, querystringParser: strictQueryParser },
  });

  // Every endpoint takes application/x-www-form-urlencoded (RFC 6749 §3.2, HTML forms); JSON or
  // text bodies are refused with 415 rather than half-understood.
  app.removeContentTypeParser(['application/json', 'text/plain']);
  registerStrictInput(app);
  registerSecretsNotInUrl(app);
  const forwarding = registerUntrustedForwardingWatch(app, deps);
  // Declared before @fastify/view is registered, which otherwise gives every request (every poll
  // too) an onRequest hook that sets reply.locals = {}; no page reads reply.locals.
  app.decorateReply('locals', null);
  await app.register(view, {
    engine: { eta: new Eta({ views: viewsFolder, cache: true, autoEscape: true }) },
    templates: viewsFolder,
    defaultContext: {
      issuer: deps.config.issuer,
      serviceName: deps.config.serviceName,
      serviceLogo: deps.config.serviceLogoUrl ?? null,
      // CC BY 4.0: pages that show the shipped data's results credit its makers.
      geoCredits: GEO_DATA_CREDITS.filter((credit) => credit.licence.includes('CC BY')),
    },
  });
  // A translation that is not complete is served in English where it falls short; the operator hears which messages.
  for (const problem of pageCatalogues.problems) app.log.warn({ problem }, 'catalogue incomplete');
  registerErrorHandler(app);
  registerAnswerFinishing(app, deps);

  app.get('/static/style.css', async (_request, reply) =>
    reply.type('text/css; charset=utf-8').header('Cache-Control', 'public, max-age=3600').send(stylesheet),
  );
  if (deps.config.serviceLogoFile) {
    const logo = readServiceLogo(deps.config.serviceLogoFile);
    app.get('/static/logo', async (_request, reply) =>
      reply
        .type(logo.contentType)
        .header('Cache-Control', 'public, max-age=3600')
        .header('Content-Security-Policy', "default-src 'none'; sandbox")
        .send(logo.bytes),
    );
  }

  metricsRoutes(app, deps);
  healthRoutes(app, deps, forwarding);
  // Outside the pages: an image needs no session, so its requests parse no cookie.
  iconRoutes(app, deps);
  discoveryRoutes(app, deps);
  deviceAuthorizationRoutes(app, deps);
  tokenRoutes(app, deps);
  revokeRoutes(app, deps);
  introspectRoutes(app, deps);
  userinfoRoutes(app, deps);
  // Issue 32 §3: the Shared Signals transmitter, with JSON bodies of its own.
  await ssfRoutes(app, deps);
  endSessionFormRoute(app);

  // Pages get browser sessions and the CSRF check; OAuth endpoints never see a cookie.
  await app.register(async (pages) => {
    // Only pages read cookies, so only their requests pay for parsing them.
    await pages.register(cookie);
    registerSessions(pages, deps);
    registerCsrfCheck(pages);
    homeRoutes(pages);
    signInRoutes(pages, deps);
    activateRoutes(pages, deps);
    accountRoutes(pages, deps);
    authorizeRoutes(pages, deps);
    endSessionRoutes(pages, deps);
  });

  // Past the cap, node closes a new socket at once (it never reaches a route).
  app.server.maxConnections = deps.config.http.maxConnections;
  return app;
}
