import { createServer, connect as connectTcp, type Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectDatabase, type ChannelSubscriber, type Database, type DatabaseHandle } from '../../src/db/connect.js';
import { LISTENER_APPLICATION_NAME, PROBE_EVERY_MS, PROBE_TIMEOUT_MS } from '../../src/db/channels.js';
import type { ClientsTable } from '../../src/db/schema.js';
import { sha256 } from '../../src/lib/random.js';
import { CLIENT_CHANGES_CHANNEL } from '../../src/apps/directory.js';
import { basicAuth, seedClient, startTestApp, type TestApp } from '../helpers/app.js';
import { createTestDatabase, type TestDatabase } from '../helpers/database.js';
import { poll, requestDeviceCode } from '../helpers/device.js';
import { startServerProcess } from '../helpers/server-process.js';
import { createClusterDatabase, POSTGRES_BIN, postgresBinariesPresent } from '../helpers/throwaway-cluster.js';
import type { TestClient } from '../helpers/tokens.js';

/**
 * Issue 19 §4: every instance keeps the clients it has read in memory (ClientDirectory), so a
 * client disabled, re-scoped, given a new secret or deleted through one instance (or the CLI, or
 * psql) must be refused or changed on every other at its next request. Two app instances on one
 * database: on PostgreSQL each with its own pool and its own listener connection, on the embedded
 * database two sets of deps over the one PGlite, its in-process equivalent. The changes are made
 * with plain SQL through instance A's database, as any writer would; B must see each at once.
 */

const EMAIL_AND_MORE = ['openid', 'profile', 'email'];
const WITHOUT_EMAIL = ['openid', 'profile'];

interface Instances {
  a: TestApp;
  b: TestApp;
  close(): Promise<void>;
}

/**
 * Holds B's reads of a client row, once the database has answered them, until opened: a read
 * that saw the row before a change then returns after B heard of the change, the order a slow
 * read or a busy event loop can produce, made certain.
 */
class ClientReadGate {
  #closed: Promise<void> | null = null;
  #open: () => void = () => {};
  waiting = 0;

  close(): void {
    this.#closed = new Promise((resolve) => (this.#open = resolve));
  }

  open(): void {
    this.#open();
    this.#closed = null;
  }

  async pass(): Promise<void> {
    const closed = this.#closed;
    if (!closed) return;
    this.waiting++;
    await closed;
    this.waiting--;
  }

  /** The database as B uses it: every `selectFrom('clients')` that B runs waits at the gate after its answer came. */
  around(db: Database): Database {
    const gate = this;
    const heldAtTheEnd = <T extends object>(builder: T): T =>
      new Proxy(builder, {
        get(target, property) {
          const value = Reflect.get(target, property, target) as unknown;
          if (typeof value !== 'function') return value;
          return (...args: unknown[]) => {
            const result = (value as (...a: unknown[]) => unknown).apply(target, args);
            if (property === 'executeTakeFirst')
              return (result as Promise<unknown>).then(async (row) => {
                await gate.pass();
                return row;
              });
            return result && typeof result === 'object' && 'executeTakeFirst' in result ? heldAtTheEnd(result) : result;
          };
        },
      });
    return new Proxy(db, {
      get(target, property) {
        const value = Reflect.get(target, property, target) as unknown;
        if (typeof value !== 'function') return value;
        if (property !== 'selectFrom') return (value as () => unknown).bind(target);
        return (table: unknown) => {
          const builder = (value as (t: unknown) => object).call(target, table);
          return table === 'clients' ? heldAtTheEnd(builder) : builder;
        };
      },
    });
  }
}

/** A and B on one database; B has a pool and a listener of its own where the database allows it. */
async function twoInstances(database: TestDatabase, gate = new ClientReadGate()): Promise<Instances> {
  const a = await startTestApp({ database });
  let ownHandle: DatabaseHandle | null = null;
  let b: TestApp;
  if (database.url) {
    ownHandle = await connectDatabase({ databaseUrl: database.url, dataDir: 'unused', poolSize: 10 });
    const handle: DatabaseHandle = { ...ownHandle, db: gate.around(ownHandle.db) };
    b = await startTestApp({ database: { handle, url: database.url, drop: () => handle.close() } });
  } else {
    b = await startTestApp({ database: { ...database, handle: { ...database.handle, db: gate.around(database.handle.db) } } });
  }
  return {
    a,
    b,
    async close() {
      await b.close();
      await ownHandle?.close();
      await a.close();
    },
  };
}

/** A device authorization request as the app sends it: HTTP Basic with a secret, client_id without. */
function askForCode(t: TestApp, client: TestClient, scope = 'openid', secret = client.clientSecret) {
  return secret
    ? requestDeviceCode(t, { scope }, { authorization: basicAuth(client.clientId, secret) })
    : requestDeviceCode(t, { client_id: client.clientId, scope });
}

async function changeClient(t: TestApp, clientId: string, change: Partial<Record<keyof ClientsTable, unknown>>): Promise<void> {
  await t.deps.db
    .updateTable('clients')
    .set(change as never)
    .where('client_id', '=', clientId)
    .execute();
}

/** Runs `change` with the trigger switched off: nobody hears of it. */
async function unannounced(t: TestApp, change: () => Promise<void>): Promise<void> {
  await sql`ALTER TABLE clients DISABLE TRIGGER clients_changes_are_announced`.execute(t.deps.db);
  try {
    await change();
  } finally {
    await sql`ALTER TABLE clients ENABLE TRIGGER clients_changes_are_announced`.execute(t.deps.db);
  }
}

/** How long each announcement took from its commit (the change's return) to being heard by B, in ms. */
const deliveryMs: number[] = [];

/**
 * Makes a change and returns once `listener` has heard of it. An announcement is delivered a
 * moment after the commit (on PostgreSQL it travels on the listener's own connection): "the next
 * request" is the next one after that moment.
 */
async function announcedTo(listener: TestApp, change: () => Promise<unknown>): Promise<void> {
  const heardBefore = listener.deps.clients.announcementsHeard;
  await change();
  const committed = performance.now();
  for (let turn = 0; turn < 1_000_000 && listener.deps.clients.announcementsHeard === heardBefore; turn++) {
    if (performance.now() - committed > 5_000) throw new Error('the change was not announced within 5 s');
    await new Promise((resolve) => setImmediate(resolve));
  }
  deliveryMs.push(performance.now() - committed);
}

afterAll(() => {
  const sorted = [...deliveryMs].sort((x, y) => x - y);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]?.toFixed(2);
  console.info(JSON.stringify({ announcements: sorted.length, deliveryMs: { median: at(0.5), p90: at(0.9), max: at(1) } }));
});

/** Waits, bounded in count and time, until `done`. */
async function waitFor(done: () => boolean | Promise<boolean>, what: string, boundMs = 10_000): Promise<void> {
  const started = Date.now();
  for (let attempt = 0; attempt < 1000 && Date.now() - started < boundMs; attempt++) {
    if (await done()) return;
    await sleep(20);
  }
  throw new Error(`timed out waiting for ${what}`);
}

describe('client changes are announced on the database (the trigger, heard through DatabaseHandle.listen)', () => {
  let database: TestDatabase;
  const heard: string[] = [];
  const events: string[] = [];
  const subscriber: ChannelSubscriber = {
    onNotification: (payload) => heard.push(payload),
    onListening: () => events.push('listening'),
    onListeningLost: () => events.push('lost'),
  };

  beforeAll(async () => {
    database = await createTestDatabase();
  });
  afterAll(() => database.drop());

  it('an update or a deletion names the client once its transaction commits; an insert and a rolled-back change name nothing', async () => {
    const db = database.handle.db;
    const subscription = await database.handle.listen(CLIENT_CHANGES_CHANNEL, subscriber);
    try {
      expect(events).toEqual(['listening']);
      const seeding = { deps: { db } };
      const changed = await seedClient(seeding);
      const deleted = await seedClient(seeding);
      const untouched = await seedClient(seeding);
      /** Every announcement of a committed change arrives; a wait for one that never comes is bounded. */
      const heardSoon = async (expected: string[]) => {
        await waitFor(() => heard.length >= expected.length, `${expected.length} announcements`, 5_000).catch(() => {});
        return heard.splice(0);
      };
      expect(await heardSoon([])).toEqual([]);

      await db.transaction().execute(async (trx) => {
        await trx.updateTable('clients').set({ name: 'Renamed TV' }).where('client_id', '=', changed.clientId).execute();
        // Not before the commit: nobody may read the old row after hearing of the new one.
        await sleep(50);
        expect(heard).toEqual([]);
      });
      expect(await heardSoon([changed.clientId])).toEqual([changed.clientId]);

      await db.deleteFrom('clients').where('client_id', '=', deleted.clientId).execute();
      expect(await heardSoon([deleted.clientId])).toEqual([deleted.clientId]);

      await expect(
        db.transaction().execute(async (trx) => {
          await trx.updateTable('clients').set({ name: 'Never' }).where('client_id', '=', untouched.clientId).execute();
          throw new Error('rolled back');
        }),
      ).rejects.toThrow('rolled back');
      // The insert that follows is announced by nothing; the update after it is, alone.
      await seedClient(seeding);
      await db.updateTable('clients').set({ name: 'Marker' }).where('client_id', '=', changed.clientId).execute();
      expect(await heardSoon([changed.clientId])).toEqual([changed.clientId]);
    } finally {
      await subscription.close();
    }
    expect(events).toEqual(['listening']);
  });
});

describe('a client change made through one instance is seen by the other at its next request', () => {
  let database: TestDatabase;
  let instances: Instances;
  let a: TestApp;
  let b: TestApp;
  const gate = new ClientReadGate();

  beforeAll(async () => {
    database = await createTestDatabase();
    instances = await twoInstances(database, gate);
    ({ a, b } = instances);
    expect([a.deps.clients.listening, b.deps.clients.listening]).toEqual([true, true]);
  });
  afterAll(async () => {
    await instances?.close();
    await database?.drop();
  });

  /** A client both instances have used, so that each holds it in memory. */
  async function warmClient(options: Parameters<typeof seedClient>[1] = {}): Promise<TestClient> {
    const client = await seedClient(a, { scopes: EMAIL_AND_MORE, ...options });
    for (const instance of [a, b]) expect((await askForCode(instance, client, 'email')).statusCode).toBe(200);
    return client;
  }

  it('the premise: B answers from memory, so a change nobody announced leaves it granting a scope the database no longer allows', async () => {
    const tv = await warmClient();
    await unannounced(a, () => changeClient(a, tv.clientId, { allowed_scopes: WITHOUT_EMAIL }));
    expect((await askForCode(b, tv, 'email')).statusCode).toBe(200);
    // Announced, the same change is seen.
    await announcedTo(b, () => changeClient(a, tv.clientId, { allowed_scopes: WITHOUT_EMAIL }));
    expect((await askForCode(b, tv, 'email')).statusCode).toBe(400);
  });

  it('an app disabled on A is refused by B at its next request', async () => {
    const tv = await warmClient();
    await announcedTo(b, () => changeClient(a, tv.clientId, { disabled_at: new Date() }));
    const answer = await askForCode(b, tv);
    expect([answer.statusCode, answer.json()]).toEqual([401, { error: 'invalid_client', error_description: 'this app is disabled' }]);
  });

  it('a scope removed from an app on A is refused by B at its next request (invalid_scope), and one added is granted', async () => {
    const tv = await warmClient();
    await announcedTo(b, () => changeClient(a, tv.clientId, { allowed_scopes: WITHOUT_EMAIL }));
    const removed = await askForCode(b, tv, 'email');
    expect([removed.statusCode, removed.json().error]).toEqual([400, 'invalid_scope']);

    await announcedTo(b, () => changeClient(a, tv.clientId, { allowed_scopes: [...WITHOUT_EMAIL, 'offline_access'] }));
    expect((await askForCode(b, tv, 'offline_access')).statusCode).toBe(200);
  });

  it('a secret replaced on A: B refuses the old secret and accepts the new one at its next request', async () => {
    const bot = await warmClient({ kind: 'bot', type: 'confidential', name: 'Helper Bot' });
    const newSecret = 'dacs_the-next-secret-of-this-bot-0123456789abcdef';
    await announcedTo(b, () => changeClient(a, bot.clientId, { secret_hash: sha256(newSecret) }));
    const old = await askForCode(b, bot);
    expect([old.statusCode, old.json()]).toEqual([401, { error: 'invalid_client', error_description: 'client authentication failed' }]);
    expect((await askForCode(b, bot, 'openid', newSecret)).statusCode).toBe(200);
  });

  it('an app deleted on A is an unknown client to B at its next request', async () => {
    const tv = await warmClient();
    await announcedTo(b, () => a.deps.db.deleteFrom('clients').where('client_id', '=', tv.clientId).execute());
    const answer = await askForCode(b, tv);
    expect([answer.statusCode, answer.json()]).toEqual([401, { error: 'invalid_client', error_description: 'unknown client' }]);
  });

  it('a change committed while B reads that client for many requests at once never leaves B holding the old row', async () => {
    const AT_ONCE = 24;
    const tv = await warmClient();
    // Each poll of an unknown code reads its app again (to tell a disabled app from an unknown
    // code) and may keep what it read. Every one of these reads sees the row before the change
    // and returns after B heard of it.
    gate.close();
    let polls: Promise<number[]>;
    try {
      polls = Promise.all(Array.from({ length: AT_ONCE }, async () => (await poll(b, tv.clientId, 'da_dc_no-such-code')).statusCode));
      await waitFor(() => gate.waiting === AT_ONCE, 'every read to have seen the row before the change');
      await announcedTo(b, () => changeClient(a, tv.clientId, { allowed_scopes: WITHOUT_EMAIL }));
    } finally {
      gate.open();
    }
    expect(await polls).toEqual(Array(AT_ONCE).fill(400));
    const next = await askForCode(b, tv, 'email');
    expect([next.statusCode, next.json().error]).toEqual([400, 'invalid_scope']);
  });
});

/**
 * A loopback TCP proxy to a PostgreSQL server that can stop passing bytes, in both directions and
 * on every connection, without closing anything: a connection dropped without a word, as by a
 * dead NAT entry or a partitioned network. Thawed, it delivers what it held.
 */
async function startFreezableProxy(databaseUrl: string) {
  const target = new URL(databaseUrl);
  let frozen = false;
  const flushes = new Set<() => void>();
  const sockets = new Set<Socket>();
  const server = createServer((downstream) => {
    const upstream = connectTcp(Number(target.port || 5432), target.hostname);
    const held: Array<[Socket, Buffer]> = [];
    const flush = () => {
      for (const [to, chunk] of held.splice(0)) to.write(chunk);
    };
    const forward = (to: Socket) => (chunk: Buffer) => (frozen ? held.push([to, chunk]) : to.write(chunk));
    downstream.on('data', forward(upstream));
    upstream.on('data', forward(downstream));
    const end = () => {
      downstream.destroy();
      upstream.destroy();
      flushes.delete(flush);
      sockets.delete(downstream);
      sockets.delete(upstream);
    };
    for (const socket of [downstream, upstream]) {
      sockets.add(socket);
      socket.on('error', end).on('close', end);
    }
    flushes.add(flush);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const proxied = new URL(databaseUrl);
  proxied.hostname = '127.0.0.1';
  proxied.port = String((server.address() as { port: number }).port);
  return {
    url: proxied.toString(),
    freeze: () => {
      frozen = true;
    },
    thaw() {
      frozen = false;
      for (const flush of flushes) flush();
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

// Killing a connection needs PostgreSQL: the run's server when TEST_DATABASE_URL is set, a
// throwaway cluster of our own otherwise (the embedded database has no connection to lose).
const postgresAvailable = Boolean(process.env.TEST_DATABASE_URL) || postgresBinariesPresent();

describe.skipIf(!postgresAvailable)(`the listener's connection is lost (PostgreSQL: the run's server, or a throwaway cluster from ${POSTGRES_BIN})`, () => {
  let database: TestDatabase;
  let instances: Instances;
  let a: TestApp;
  let b: TestApp;

  beforeAll(async () => {
    database = process.env.TEST_DATABASE_URL ? await createTestDatabase() : await createClusterDatabase();
    instances = await twoInstances(database);
    ({ a, b } = instances);
  }, 120_000);
  afterAll(async () => {
    await instances?.close();
    await database?.drop();
  });

  const listenerSessions = async () => {
    const { rows } = await sql<{ pid: number }>`
      SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND application_name = ${LISTENER_APPLICATION_NAME}`.execute(a.deps.db);
    return rows;
  };

  it('a change made while B reconnects is seen at its next request; listening again, B caches and hears changes again', async () => {
    const [duringGap, afterReconnect, later] = [
      await seedClient(a, { scopes: EMAIL_AND_MORE }),
      await seedClient(a, { scopes: EMAIL_AND_MORE }),
      await seedClient(a, { scopes: EMAIL_AND_MORE }),
    ];
    for (const client of [duringGap, afterReconnect]) expect((await askForCode(b, client, 'email')).statusCode).toBe(200);
    const before = await listenerSessions();
    // A's and B's, three each: client changes, signing key changes and device policy changes (issue 31 §2).
    expect(before).toHaveLength(6);

    await sql`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid IN (${sql.join(before.map((s) => s.pid))})`.execute(a.deps.db);
    await waitFor(() => !b.deps.clients.listening, 'B to notice its listener is gone');
    await waitFor(async () => (await listenerSessions()).length === 0, 'the listeners to end');

    // Nobody listens: these are announced to no one.
    await changeClient(a, duringGap.clientId, { allowed_scopes: WITHOUT_EMAIL });
    await changeClient(a, afterReconnect.clientId, { allowed_scopes: WITHOUT_EMAIL });
    const whileAway = await askForCode(b, duringGap, 'email');
    expect([whileAway.statusCode, whileAway.json().error]).toEqual([400, 'invalid_scope']);

    await waitFor(() => a.deps.clients.listening && b.deps.clients.listening, 'A and B to listen again', 20_000);
    await waitFor(async () => (await listenerSessions()).length === 6, 'the key and policy listeners to return too', 20_000);
    const afterwards = await askForCode(b, afterReconnect, 'email');
    expect([afterwards.statusCode, afterwards.json().error]).toEqual([400, 'invalid_scope']);

    // Listening again, B holds clients in memory again (an unannounced change goes unseen) ...
    expect((await askForCode(b, later, 'email')).statusCode).toBe(200);
    await unannounced(a, () => changeClient(a, later.clientId, { allowed_scopes: WITHOUT_EMAIL }));
    expect((await askForCode(b, later, 'email')).statusCode).toBe(200);
    // ... and hears announced ones.
    await announcedTo(b, () => changeClient(a, later.clientId, { name: 'Announced' }));
    expect((await askForCode(b, later, 'email')).statusCode).toBe(400);
  }, 60_000);

  it('a listener that stops hearing without a word (its connection frozen) is given up within its probe bound; a change made meanwhile is seen once the instance reads again', async () => {
    const proxy = await startFreezableProxy(database.url!);
    const handle = await connectDatabase({ databaseUrl: proxy.url, dataDir: 'unused', poolSize: 4 });
    const c = await startTestApp({ database: { handle, url: proxy.url, drop: async () => {} } });
    try {
      expect(c.deps.clients.listening).toBe(true);
      const tv = await seedClient(a, { scopes: EMAIL_AND_MORE });
      expect((await askForCode(c, tv, 'email')).statusCode).toBe(200);

      proxy.freeze();
      const frozenAt = Date.now();
      // The announcement goes out, and is held in the proxy with everything else for C.
      await changeClient(a, tv.clientId, { allowed_scopes: WITHOUT_EMAIL });
      const bound = PROBE_EVERY_MS + PROBE_TIMEOUT_MS;
      await waitFor(() => !c.deps.clients.listening, 'C to give up its silent listener', bound + 5_000);
      // A little slack over the bound for timers on a loaded machine.
      expect(Date.now() - frozenAt).toBeLessThan(bound + 1_500);

      proxy.thaw();
      const answer = await askForCode(c, tv, 'email');
      expect([answer.statusCode, answer.json().error]).toEqual([400, 'invalid_scope']);
      await waitFor(() => c.deps.clients.listening, 'C to listen again', 20_000);
    } finally {
      proxy.thaw();
      await c.close();
      await handle.close();
      await proxy.close();
    }
  }, 60_000);
});

describe.skipIf(!postgresBinariesPresent())(
  `the server process while its listener cannot connect (a throwaway cluster; skipped only without ${POSTGRES_BIN}/initdb)`,
  () => {
    it('keeps running, says once at info that it is not listening, and exits 0 within 10 s of SIGTERM', async () => {
      const database = await createClusterDatabase();
      try {
        const server = await startServerProcess(
          { DATABASE_URL: database.url, ISSUER: 'http://auth.example.test', PURGE_INTERVAL: '0', LOG_LEVEL: 'info' },
          60_000,
        );
        try {
          await waitFor(async () => {
            const probe = new pg.Client({ connectionString: database.url });
            await probe.connect();
            try {
              const { rows } = await probe.query('SELECT 1 FROM pg_stat_activity WHERE application_name = $1', [LISTENER_APPLICATION_NAME]);
              // Client changes, signing key changes and device policy changes (issue 31 §2).
              return rows.length === 3;
            } finally {
              await probe.end();
            }
          }, 'the server to listen');
          const outageStart = server.output().length;
          await database.cluster.stop('fast');
          await waitFor(() => server.output().slice(outageStart).includes('not listening to client changes'), 'the server to notice');
          // Long enough for a reconnection attempt or two to fail against the stopped database.
          await sleep(2_500);
          expect(server.child.exitCode).toBeNull();
          const lines = server.output().slice(outageStart).split('\n').filter(Boolean);
          expect(lines.filter((line) => line.includes('not listening to client changes'))).toHaveLength(1);
          expect(lines.filter((line) => /"level":(40|50|60)/.test(line) || line.includes('"stack"'))).toEqual([]);

          const signalled = Date.now();
          expect(await server.stop('SIGTERM', 15_000)).toBe(0);
          expect(Date.now() - signalled).toBeLessThan(10_000);
        } finally {
          if (server.child.exitCode === null) await server.stop('SIGKILL');
        }
      } finally {
        await database.drop();
      }
    }, 120_000);
  },
);
