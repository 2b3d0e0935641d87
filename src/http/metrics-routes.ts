import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Deps } from '../deps.js';
import { safeEqual } from '../lib/random.js';

/**
 * GET /metrics in Prometheus format, closed to the public: it answers only a scraper presenting
 * METRICS_TOKEN as a bearer token, and does not exist at all while METRICS_TOKEN is unset.
 */
export function metricsRoutes(app: FastifyInstance, deps: Deps): void {
  const { metrics } = deps;
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

/**
 * Records one answer in the request-duration histogram, by method, route and status; app.ts calls
 * it from the one onSend hook every answer passes. The duration runs to the moment the answer is
 * handed to the socket, not to the last byte written: an onResponse hook, which fastify runs only
 * then, cost the poll about 5 % of its server CPU (docs/benchmarks.md, 2026-11-27 (afternoon)).
 */
export function requestDurationRecorder(metrics: Deps['metrics']): (request: FastifyRequest, reply: FastifyReply) => void {
  return (request, reply) => {
    metrics.httpRequestDuration.observe(request.method, request.routeOptions.url ?? 'unmatched', reply.statusCode, reply.elapsedTime / 1000);
  };
}
