/**
 * The two ceilings the benchmark measures every scenario against, served by a separate small
 * Fastify process started like the server (same core, NODE_ENV=production, logger at warn):
 *
 *   POST /ceiling/form    parses a form and replies JSON: what any Fastify route costs.
 *   POST /ceiling/update  one `UPDATE bench_ceiling SET n = n + 1, touched_at = now() WHERE id = $1
 *                         RETURNING n` on a 20,000-row table with a primary key, id from the form:
 *                         what one indexed single-row write round trip costs.
 *
 * PORT, and DATABASE_URL + DATABASE_POOL_SIZE (pg) or DATA_DIR (an embedded PGlite of its own).
 * Creates and fills its table at start.
 */
import formbody from '@fastify/formbody';
import Fastify from 'fastify';
import pg from 'pg';
import { CEILING_ROWS } from './fixtures.js';

interface Store {
  update(id: number): Promise<number | undefined>;
  close(): Promise<void>;
}

const CREATE = [
  'DROP TABLE IF EXISTS bench_ceiling',
  `CREATE TABLE bench_ceiling (
     id         integer PRIMARY KEY,
     n          bigint NOT NULL DEFAULT 0,
     touched_at timestamptz NOT NULL DEFAULT now()
   )`,
  `INSERT INTO bench_ceiling (id) SELECT generate_series(1, ${CEILING_ROWS})`,
  'VACUUM ANALYZE bench_ceiling',
];
const UPDATE = 'UPDATE bench_ceiling SET n = n + 1, touched_at = now() WHERE id = $1 RETURNING n';

async function openStore(): Promise<Store> {
  const url = process.env.DATABASE_URL;
  if (url) {
    const pool = new pg.Pool({ connectionString: url, max: Number(process.env.DATABASE_POOL_SIZE ?? 10) });
    for (const statement of CREATE) await pool.query(statement);
    return {
      async update(id) {
        const result = await pool.query<{ n: string }>(UPDATE, [id]);
        return result.rows[0] ? Number(result.rows[0].n) : undefined;
      },
      close: () => pool.end(),
    };
  }
  const dataDir = process.env.DATA_DIR;
  if (!dataDir) throw new Error('DATABASE_URL or DATA_DIR is required');
  const { PGlite } = await import('@electric-sql/pglite');
  const pglite = new PGlite(dataDir);
  for (const statement of CREATE) await pglite.exec(statement);
  return {
    async update(id) {
      const result = await pglite.query<{ n: number }>(UPDATE, [id]);
      return result.rows[0] ? Number(result.rows[0].n) : undefined;
    },
    close: () => pglite.close(),
  };
}

async function main(): Promise<void> {
  const store = await openStore();
  const app = Fastify({ logger: { level: 'warn' } });
  await app.register(formbody);
  app.post('/ceiling/form', async (request, reply) => {
    const form = request.body as Record<string, string | undefined>;
    return reply.header('Cache-Control', 'no-store').send({ ok: true, id: Number(form.id), name: form.name ?? null });
  });
  app.post('/ceiling/update', async (request, reply) => {
    const id = Number((request.body as Record<string, string | undefined>).id);
    if (!Number.isInteger(id)) return reply.code(400).send({ error: 'invalid_request' });
    const n = await store.update(id);
    return reply.header('Cache-Control', 'no-store').send({ id, n });
  });
  app.get('/healthz', async () => ({ ok: true }));
  const stop = async () => {
    await app.close();
    await store.close();
    process.exit(0);
  };
  process.on('SIGTERM', () => void stop());
  process.on('SIGINT', () => void stop());
  await app.listen({ host: '127.0.0.1', port: Number(process.env.PORT ?? 0) });
}

main().catch((error: unknown) => {
  process.stderr.write(`ceilings failed: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
