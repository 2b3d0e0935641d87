import type { FastifyInstance } from 'fastify';
import { sql } from 'kysely';
import type { Deps } from '../deps.js';
import { migrationsAreCurrent } from '../db/migrate.js';

export function healthRoutes(app: FastifyInstance, deps: Deps): void {
  // Liveness: the process answers. Never touches the database, so an outage does not get it restarted.
  app.get('/healthz', async (_request, reply) => reply.header('Cache-Control', 'no-store').send({ status: 'ok' }));

  // Readiness: the database answers and carries every migration this build ships.
  app.get('/readyz', async (request, reply) => {
    reply.header('Cache-Control', 'no-store');
    try {
      await sql`SELECT 1`.execute(deps.db);
      if (!(await migrationsAreCurrent(deps.db))) return reply.code(503).send({ status: 'unavailable', reason: 'migrations pending' });
      return reply.send({ status: 'ready' });
    } catch (error) {
      request.log.warn({ err: error }, 'readiness check failed');
      return reply.code(503).send({ status: 'unavailable', reason: 'database unreachable' });
    }
  });
}
