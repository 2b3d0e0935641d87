import type { FastifyInstance } from 'fastify';
import type { Deps } from '../deps.js';
import { safeEqual } from '../lib/random.js';

/**
 * GET /metrics in Prometheus format, closed to the public: it answers only a scraper presenting
 * METRICS_TOKEN as a bearer token, and does not exist at all while METRICS_TOKEN is unset.
 */
export function metricsRoutes(app: FastifyInstance, deps: Deps): void {
  const { metrics } = deps;

  // Synchronous: it runs on every request, and an async hook costs a promise each time.
  app.addHook('onResponse', (request, reply, done) => {
    metrics.httpRequestDuration.observe(
      { method: request.method, route: request.routeOptions.url ?? 'unmatched', status: String(reply.statusCode) },
      reply.elapsedTime / 1000,
    );
    done();
  });

  const token = deps.config.metricsToken;
  if (!token) return;
  app.get('/metrics', async (request, reply) => {
    const presented = /^Bearer (.+)$/.exec(request.headers.authorization ?? '')?.[1];
    if (!presented || !safeEqual(presented, token)) {
      return reply.code(401).header('WWW-Authenticate', 'Bearer realm="metrics"').send({ error: 'unauthorized' });
    }
    return reply
      .header('Content-Type', metrics.registry.contentType)
      .header('Cache-Control', 'no-store')
      .send(await metrics.registry.metrics());
  });
}
