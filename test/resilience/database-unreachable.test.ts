import { setTimeout as sleep } from 'node:timers/promises';
import type { LightMyRequestResponse as Response } from 'fastify';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectDatabase, type DatabaseHandle } from '../../src/db/connect.js';
import { migrateToLatest } from '../../src/db/migrate.js';
import { FORM, form, seedClient, seedUser, startTestApp, type TestApp } from '../helpers/app.js';
import { type Browser, signedInBrowser } from '../helpers/browser.js';
import { DEVICE_GRANT, poll, requestDeviceCode, startDeviceFlow } from '../helpers/device.js';
import { startServerProcess } from '../helpers/server-process.js';
import { createThrowawayCluster, POSTGRES_BIN, postgresBinariesPresent, type ThrowawayCluster } from '../helpers/throwaway-cluster.js';

/**
 * Issue 18, point 6: every way of failing to obtain a connection (refused, database not
 * accepting connections, too many connections, a password rotated under the app, the database
 * gone) is answered 503 temporarily_unavailable on OAuth endpoints and a 503 page on pages, fails
 * /readyz, logs one warn line without a stack per request, and the same app instance recovers by
 * itself once the situation is undone: its pool simply connects again.
 *
 * Each situation is real, on a throwaway cluster of the test's own (the shared server is never
 * altered): the app connects as a role that must give its password (scram-sha-256), so that a
 * rotation can fail its authentication. Needs the PostgreSQL 15 server programs; skipped only when
 * initdb is not installed.
 */

const ROLE = 'da_app';
const PASSWORD = 'first-password-0123';
const DATABASE = 'device_auth';
/** Requests of each kind fired at once while the database is unreachable. */
const CONCURRENT = 3;
/** From undoing a situation to the app answering normally again, without a restart. */
const RECOVERY_BOUND_MS = 10_000;

interface Situation {
  name: string;
  /** The SQLSTATE or socket error code the connection attempt fails with. */
  code: string;
  makeUnreachable(): Promise<void>;
  undo(): Promise<void>;
}

describe.skipIf(!postgresBinariesPresent())(`the database cannot be connected to (a throwaway cluster; skipped only without ${POSTGRES_BIN}/initdb)`, () => {
  let cluster: ThrowawayCluster;
  let handle: DatabaseHandle;
  let appUrl: string;
  let t: TestApp;
  let browser: Browser;
  let clientId: string;
  let deviceCode: string;
  const logLines: string[] = [];

  /** One statement as the cluster's superuser, on a connection of its own. */
  async function asSuperuser(statement: string, database = 'postgres'): Promise<pg.QueryResult> {
    const admin = new pg.Client({ connectionString: cluster.url(database) });
    await admin.connect();
    try {
      return await admin.query(statement);
    } finally {
      await admin.end();
    }
  }

  /**
   * Ends the app's connections (all but `keepPid`'s) and waits until its pool holds none, so that
   * the next request must connect.
   */
  async function dropAppConnections(keepPid = 0): Promise<void> {
    for (let attempt = 0; attempt < 100; attempt++) {
      const { rows } = await asSuperuser(
        `SELECT count(pg_terminate_backend(pid))::int AS live FROM pg_stat_activity
         WHERE usename = '${ROLE}' AND pid <> pg_backend_pid() AND pid <> ${Number(keepPid)}`,
      );
      if (rows[0].live === 0 && handle.poolStats()?.total === 0) return;
      await sleep(50);
    }
    throw new Error('the app still holds connections');
  }

  let holder: pg.Client | null = null;
  const situations: Situation[] = [
    {
      name: 'refused (the server is stopped)',
      code: 'ECONNREFUSED',
      makeUnreachable: async () => {
        await cluster.stop('fast');
        await dropAppConnections().catch(() => {});
        await waitFor(() => handle.poolStats()?.total === 0, 'the pool to notice the stop');
      },
      undo: () => cluster.start(),
    },
    {
      name: 'not accepting connections (ALLOW_CONNECTIONS false)',
      code: '55000',
      makeUnreachable: async () => {
        await asSuperuser(`ALTER DATABASE ${DATABASE} WITH ALLOW_CONNECTIONS false`);
        await dropAppConnections();
      },
      undo: async () => void (await asSuperuser(`ALTER DATABASE ${DATABASE} WITH ALLOW_CONNECTIONS true`)),
    },
    {
      name: "too many connections (the role's CONNECTION LIMIT already used)",
      code: '53300',
      makeUnreachable: async () => {
        // The holder takes its connection before the limit, and is spared when the app's are
        // ended: otherwise one of the app's (its pool, or its client-change listener
        // reconnecting) can take the only place first.
        holder = new pg.Client({ connectionString: appUrl });
        await holder.connect();
        const { rows } = await holder.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
        await asSuperuser(`ALTER ROLE ${ROLE} CONNECTION LIMIT 1`);
        await dropAppConnections(rows[0]!.pid);
      },
      undo: async () => {
        await holder?.end();
        holder = null;
        await asSuperuser(`ALTER ROLE ${ROLE} CONNECTION LIMIT -1`);
      },
    },
    {
      name: 'authentication failure after a credential rotation',
      code: '28P01',
      makeUnreachable: async () => {
        await asSuperuser(`ALTER ROLE ${ROLE} PASSWORD 'rotated-password-4567'`);
        await dropAppConnections();
      },
      undo: async () => void (await asSuperuser(`ALTER ROLE ${ROLE} PASSWORD '${PASSWORD}'`)),
    },
    {
      name: 'database missing (renamed away under the app)',
      code: '3D000',
      makeUnreachable: async () => {
        // A database with sessions cannot be renamed: keep the app out first.
        await asSuperuser(`ALTER DATABASE ${DATABASE} WITH ALLOW_CONNECTIONS false`);
        await dropAppConnections();
        await asSuperuser(`ALTER DATABASE ${DATABASE} RENAME TO ${DATABASE}_away`);
        await asSuperuser(`ALTER DATABASE ${DATABASE}_away WITH ALLOW_CONNECTIONS true`);
      },
      undo: async () => {
        await asSuperuser(`ALTER DATABASE ${DATABASE}_away RENAME TO ${DATABASE}`);
      },
    },
  ];

  beforeAll(async () => {
    cluster = await createThrowawayCluster({ hbaRules: [`host all ${ROLE} 127.0.0.1/32 scram-sha-256`] });
    await asSuperuser(`CREATE ROLE ${ROLE} LOGIN PASSWORD '${PASSWORD}'`);
    await asSuperuser(`CREATE DATABASE ${DATABASE} OWNER ${ROLE}`);
    appUrl = `postgres://${ROLE}:${PASSWORD}@127.0.0.1:${cluster.port}/${DATABASE}`;
    handle = await connectDatabase({ databaseUrl: appUrl, dataDir: 'unused', poolSize: 4 });
    await migrateToLatest(handle.db);
    t = await startTestApp({ database: { handle, url: appUrl, drop: async () => {} }, logSink: (line) => logLines.push(line) });
    ({ clientId } = await seedClient(t));
    browser = await signedInBrowser(t, await seedUser(t));
    // The session's CSRF token, so that a POST is refused for its code, not for its form.
    expect((await browser.get('/activate')).statusCode).toBe(200);
    ({ device_code: deviceCode } = await startDeviceFlow(t, clientId));
  }, 120_000);

  afterAll(async () => {
    try {
      await holder?.end().catch(() => {});
      await t?.close();
      await handle?.close();
    } finally {
      await cluster?.destroy();
    }
  });

  const requests = {
    'POST /oauth/device/code': () => requestDeviceCode(t, { client_id: clientId }),
    'POST /oauth/token (device_code)': () => poll(t, clientId, deviceCode),
    'POST /oauth/token (refresh_token)': () =>
      t.app.inject({
        method: 'POST',
        url: '/oauth/token',
        headers: FORM,
        payload: form({ grant_type: 'refresh_token', refresh_token: 'da_rt_unknown', client_id: clientId }),
      }),
    'GET /activate (signed in)': () => browser.get('/activate'),
    'POST /activate (signed in)': () => browser.post('/activate', { user_code: 'BCDF-GHJK' }),
    'GET /readyz': () => t.app.inject({ method: 'GET', url: '/readyz' }),
  } satisfies Record<string, () => Promise<Response>>;
  type RequestName = keyof typeof requests;

  async function fireAtOnce(): Promise<Array<[RequestName, Response]>> {
    const names = Object.keys(requests) as RequestName[];
    const all = names.flatMap((name) => Array.from({ length: CONCURRENT }, () => name));
    return Promise.all(all.map(async (name) => [name, await requests[name]()] as [RequestName, Response]));
  }

  it.each(situations.map((s) => [s.name, s] as const))(
    '%s: 503 temporarily_unavailable, a 503 page, /readyz fails, one warn line each without a stack; the same app recovers by itself',
    async (_name, situation) => {
      let answers: Array<[RequestName, Response]>;
      let outageLog: string[];
      try {
        await situation.makeUnreachable();
        logLines.length = 0;
        answers = await fireAtOnce();
        outageLog = [...logLines];
      } finally {
        // Undone whatever the answers, so that the next situation starts from a working database.
        await situation.undo();
      }
      for (const [name, answer] of answers) {
        const summary = [name, answer.statusCode];
        expect(summary, answer.body.slice(0, 300)).toEqual([name, 503]);
        if (name.includes('/oauth/')) {
          expect([name, answer.json().error, answer.headers['retry-after'], answer.headers['cache-control']]).toEqual([
            name,
            'temporarily_unavailable',
            '5',
            'no-store',
          ]);
        } else if (name === 'GET /readyz') {
          expect(answer.json()).toEqual({ status: 'unavailable', reason: 'database unreachable' });
        } else {
          expect([name, answer.headers['content-type'], answer.headers['retry-after']]).toEqual([name, expect.stringMatching(/^text\/html/), '5']);
          expect(answer.body).toContain('Temporarily unavailable');
        }
      }

      const logged = outageLog.map((line) => JSON.parse(line) as { level: number; msg: string; code?: string; reason?: string });
      const warnings = logged.filter((line) => line.level >= 40);
      // One line per request, at warn, naming what the connection attempt met, and no stack anywhere.
      const described = (lines: Array<[number, string, string | undefined]>) => lines.map((line) => line.join(' ')).sort();
      expect(described(warnings.map((line) => [line.level, line.msg, line.code]))).toEqual(
        described(answers.map(([name]) => [40, name === 'GET /readyz' ? 'readiness check failed' : 'database unavailable', situation.code])),
      );
      expect(outageLog.filter((line) => line.includes('"stack"') || line.includes('    at '))).toEqual([]);
      for (const line of warnings) expect(line.reason?.length).toBeLessThanOrEqual(200);

      logLines.length = 0;
      const recovered = await waitFor(async () => (await requests['GET /readyz']()).statusCode === 200, 'the app to recover', RECOVERY_BOUND_MS);
      expect(recovered).toBeLessThan(RECOVERY_BOUND_MS);
      for (const [name, answer] of await fireAtOnce()) {
        const expected: Record<RequestName, number> = {
          'POST /oauth/device/code': 200,
          'POST /oauth/token (device_code)': 400,
          'POST /oauth/token (refresh_token)': 400,
          'GET /activate (signed in)': 200,
          // No such code: the form again, with a message.
          'POST /activate (signed in)': 400,
          'GET /readyz': 200,
        };
        expect([name, answer.statusCode], answer.body.slice(0, 300)).toEqual([name, expected[name]]);
      }
      expect(logLines.filter((line) => (JSON.parse(line) as { level: number }).level >= 40)).toEqual([]);
    },
    60_000,
  );

  it('the purge timer and the rate limiter keep the process up while the database is away, one warn line per tick without a stack', async () => {
    const server = await startServerProcess({ DATABASE_URL: appUrl, ISSUER: 'http://auth.example.test', PURGE_INTERVAL: '1', LOG_LEVEL: 'info' }, 60_000);
    try {
      const send = (path: string, body?: Record<string, string>) =>
        fetch(`${server.url}${path}`, body ? { method: 'POST', headers: FORM, body: form(body) } : {});
      const tokenRequest = { grant_type: DEVICE_GRANT, device_code: 'da_dc_unknown', client_id: clientId };
      // The app is now known to the server, so a token request is counted (tokens per client, a
      // limit counted in memory and flushed to the database) before its grant meets the outage.
      expect((await send('/oauth/token', tokenRequest)).status).toBe(400);
      await cluster.stop('fast');
      const outageStart = server.output().length;
      for (let i = 0; i < 3; i++) expect((await send('/oauth/token', tokenRequest)).status).toBe(503);
      const ticks = () =>
        server
          .output()
          .slice(outageStart)
          .split('\n')
          .filter((line) => line.includes('purge failed'));
      await waitFor(() => ticks().length >= 2, 'two purge ticks while the database is away', 10_000);
      expect(server.child.exitCode).toBeNull();
      const lines = server.output().slice(outageStart).split('\n').filter(Boolean);
      expect(lines.filter((line) => line.includes('"stack"') || line.includes('    at '))).toEqual([]);
      for (const line of ticks()) expect(JSON.parse(line)).toMatchObject({ level: 40, code: 'ECONNREFUSED' });

      await cluster.start();
      const back = server.output().length;
      await waitFor(() => server.output().slice(back).includes('purge done'), 'a purge after the database returned', 10_000);
      expect((await send('/readyz')).status).toBe(200);
    } finally {
      if (!(await isRunning(cluster))) await cluster.start();
      await server.stop();
    }
  }, 90_000);
});

async function isRunning(cluster: ThrowawayCluster): Promise<boolean> {
  const probe = new pg.Client({ connectionString: cluster.url() });
  try {
    await probe.connect();
    await probe.end();
    return true;
  } catch {
    return false;
  }
}

/** Waits, bounded in count and time, until `done`; returns how long it took. */
async function waitFor(done: () => boolean | Promise<boolean>, what: string, boundMs = 5_000): Promise<number> {
  const started = Date.now();
  for (let attempt = 0; attempt < 1000; attempt++) {
    if (await done()) return Date.now() - started;
    if (Date.now() - started > boundMs) break;
    await sleep(50);
  }
  throw new Error(`timed out waiting for ${what}`);
}
