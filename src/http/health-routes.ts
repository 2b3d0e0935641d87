import type { FastifyInstance } from 'fastify';
import { sql } from 'kysely';
import type { Deps } from '../deps.js';
import { migrationsAreCurrent } from '../db/migrate.js';
import { describeUnavailable, isDatabaseUnavailable } from '../db/unavailable.js';
import { RedisUnavailableError } from '../db/redis.js';
import type { ForwardingWatch } from './plugins/untrusted-forwarding.js';

export function healthRoutes(app: FastifyInstance, deps: Deps, forwarding?: ForwardingWatch): void {
  // Liveness: the process answers. Never touches the database, so an outage does not get it restarted.
  app.get('/healthz', async (_request, reply) => reply.header('Cache-Control', 'no-store').send({ status: 'ok' }));

  // Readiness: the database answers and carries every migration this build ships; Redis, when set, answers.
  app.get('/readyz', async (request, reply) => {
    reply.header('Cache-Control', 'no-store');
    try {
      await sql`SELECT 1`.execute(deps.db);
      if (!(await migrationsAreCurrent(deps.db))) return reply.code(503).send({ status: 'unavailable', reason: 'migrations pending' });
      await deps.counterStore.ping();
      // A misconfiguration the operator should fix, yet the server serves: a detail, not a 503.
      const untrustedForwarding = forwarding?.detail() ?? null;
      return reply.send(untrustedForwarding ? { status: 'ready', detail: { untrusted_forwarding: untrustedForwarding } } : { status: 'ready' });
    } catch (error) {
      if (error instanceof RedisUnavailableError) {
        request.log.warn({ reason: error.message }, 'readiness check failed');
        return reply.code(503).send({ status: 'unavailable', reason: 'redis unreachable' });
      }
      // Probes keep coming through an outage: one line each, no stack. Anything else is a bug worth one.
      if (isDatabaseUnavailable(error)) request.log.warn(describeUnavailable(error), 'readiness check failed');
      else request.log.error({ err: error }, 'readiness check failed');
      return reply.code(503).send({ status: 'unavailable', reason: 'database unreachable' });
    }
  });
}
