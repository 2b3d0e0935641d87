import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DeviceAuthorizationResponse } from '../../src/oauth/device/authorization.js';
import { hashOpaque } from '../../src/oauth/opaque-tokens.js';
import { seedClient, seedUser } from '../helpers/app.js';
import { startServerProcess, type ServerProcess } from '../helpers/server-process.js';
import { createClusterDatabase, POSTGRES_BIN, postgresBinariesPresent } from '../helpers/throwaway-cluster.js';
import type { TestClient, TokenSet } from '../helpers/tokens.js';
import {
  approveOverHttp,
  deviceSignInOverHttp,
  introspectOverHttp,
  pollOverHttp,
  refreshOverHttp,
  requestCodeOverHttp,
  revokeOverHttp,
  send,
  signInOverHttp,
  userinfoOverHttp,
  WebBrowser,
  type WebResponse,
} from '../helpers/web.js';

/**
 * A real PostgreSQL (a throwaway cluster of the test's own) stopped and started under
 * continuous traffic against the real server process: while it is down the server answers 503
 * (temporarily_unavailable on OAuth endpoints) and /readyz fails, the process stays up, and it
 * recovers by itself when the database returns. Afterwards nothing was delivered twice, no grant
 * has two live refresh tokens and no approval was lost.
 *
 * A 503 whose COMMIT did go through (the connection dropped before its answer came back) is the
 * one way a client misses a change that took place (docs/endpoints.md, "When the database is away"): a
 * device whose redemption committed unseen, a refresh whose rotation did. The invariants allow
 * exactly that, and only after a 503 on that very request. Both outages are tried: a fast stop
 * (backends told to end) and an immediate one (a crash, recovered at the next start).
 *
 * Needs the PostgreSQL 15 server programs; skipped only when initdb is not installed (as root,
 * which CI is, the cluster runs as the postgres OS user).
 */

const ISSUER = 'http://auth.example.test';
const SCOPE = 'openid profile email offline_access';
/** /readyz answers within the pool's 5 s connection timeout, plus a margin for a loaded machine. */
const READYZ_BOUND_MS = 7_000;
/** From the database accepting connections again to requests succeeding, without a restart. */
const RECOVERY_BOUND_MS = 10_000;
const DEVICE_WORKERS = 3;
const GRANTS = 3;
const METRICS_TOKEN = 'outage-metrics-token-0123456789';

interface Exchange {
  at: number;
  ms: number;
  endpoint: string;
  status: number | 'no answer';
  error?: string | undefined;
  retryAfter?: string | null;
}

interface Flow {
  issued: DeviceAuthorizationResponse;
  /** confirmed: the page said "Device connected", or "already decided/used" right after our own 503. */
  approval: 'none' | 'confirmed';
  /** Token responses with status 200 for this device_code. */
  delivered: number;
  /** A poll of this code was answered 503 (its redemption may have committed unseen). */
  ambiguousPoll: boolean;
  /** invalid_grant "already used" although no 200 came: redeemed while we got a 503. */
  spentUnseen: boolean;
}

interface GrantHolder {
  current: TokenSet;
  rotations: number;
  /** The current token was presented and answered 503: it may have been rotated unseen. */
  uncertain: boolean;
  refused?: { body: string; afterUncertain: boolean };
}

interface Outage {
  mode: 'fast' | 'immediate';
  downAt: number;
  stoppedAt: number;
  /** pg_ctl start was called: the database may accept connections from here on. */
  startingAt: number;
  /** pg_ctl start returned: the database accepts connections. */
  upAt: number;
  recoveredAt: number;
}

describe.skipIf(!postgresBinariesPresent())(`a PostgreSQL outage under traffic (a throwaway cluster; skipped only without ${POSTGRES_BIN}/initdb)`, () => {
  let database: Awaited<ReturnType<typeof createClusterDatabase>>;
  let server: ServerProcess;
  let tv: TestClient;
  let rs: TestClient;
  let user: { email: string; password: string };

  beforeAll(async () => {
    database = await createClusterDatabase();
    const seeding = { deps: { db: database.handle.db } };
    tv = await seedClient(seeding, { kind: 'tv' });
    rs = await seedClient(seeding, { kind: 'web', type: 'confidential', name: 'Photo API' });
    user = await seedUser(seeding);
    server = await startServerProcess(
      { DATABASE_URL: database.url, ISSUER, DEVICE_POLL_INTERVAL: '1', LOG_LEVEL: 'warn', PURGE_INTERVAL: '0', METRICS_TOKEN },
      60_000,
    );
  }, 120_000);

  afterAll(async () => {
    try {
      await server?.stop();
    } finally {
      await database?.drop();
    }
  });

  it('answers 503 while the database is down, stays up, recovers by itself, and delivers nothing twice nor loses an approval', async () => {
    const url = server.url;
    const exchanges: Exchange[] = [];
    let stopping = false;
    /** The test failed: every loop ends at once. */
    let aborted = false;
    const hardDeadline = Date.now() + 100_000;

    /** Records the exchange; a request the server does not answer at all fails the worker that sent it. */
    async function call(endpoint: string, request: () => Promise<WebResponse>): Promise<WebResponse> {
      const at = Date.now();
      try {
        const response = await request();
        const json = response.headers.get('content-type')?.includes('application/json');
        const error = json ? (response.json().error as string | undefined) : undefined;
        exchanges.push({ at, ms: Date.now() - at, endpoint, status: response.status, error, retryAfter: response.headers.get('retry-after') });
        return response;
      } catch (error) {
        exchanges.push({ at, ms: Date.now() - at, endpoint, status: 'no answer', error: String(error) });
        throw new Error(`${endpoint}: no answer (server exit code ${server.child.exitCode}): ${String(error)}\n${server.output().slice(-2000)}`);
      }
    }

    // --- Traffic: device flows approved on the pages, refresh rotations, introspection, probes.
    const flows: Flow[] = [];
    const holders: GrantHolder[] = [];
    // One browser per device worker, one approving codes issued just before each outage, one for the test's own checks.
    const signedInBrowser = async () => {
      const browser = new WebBrowser(url);
      await signInOverHttp(browser, user);
      return browser;
    };
    const workerBrowsers: WebBrowser[] = [];
    for (let i = 0; i < DEVICE_WORKERS; i++) workerBrowsers.push(await signedInBrowser());
    const approverBrowser = await signedInBrowser();
    const probeBrowser = await signedInBrowser();
    for (let i = 0; i < GRANTS; i++) {
      holders.push({ current: await deviceSignInOverHttp(probeBrowser, tv, { issue: url, approve: url, redeem: url }, SCOPE), rotations: 0, uncertain: false });
    }

    async function approve(browser: WebBrowser, flow: Flow): Promise<void> {
      let sawUnavailable = false;
      for (let attempt = 0; attempt < 60 && Date.now() < hardDeadline && !stopping; attempt++) {
        const answer = await call('approval pages', () => approveOverHttp(browser, flow.issued.user_code, flow.issued.confirmation_phrase));
        if (answer.status === 200 && answer.body.includes('Device connected')) {
          flow.approval = 'confirmed';
          return;
        }
        // Only we decide these requests: "already decided" or "already used" after a 503 means our approval committed.
        if (sawUnavailable && (answer.status === 409 || answer.status === 410)) {
          flow.approval = 'confirmed';
          return;
        }
        if (answer.status !== 503) throw new Error(`approval refused: ${answer.status} ${answer.body.slice(0, 300)}`);
        sawUnavailable = true;
        await sleep(300);
      }
    }

    async function pollForTokens(flow: Flow): Promise<void> {
      let interval = flow.issued.interval;
      for (let attempt = 0; attempt < 120 && Date.now() < hardDeadline && !aborted; attempt++) {
        await sleep(interval * 1000 + 100);
        const answer = await call('token: device_code', () => pollOverHttp(url, tv, flow.issued.device_code));
        if (answer.status === 200) {
          flow.delivered++;
          return;
        }
        if (answer.status === 503) {
          flow.ambiguousPoll = true;
          continue;
        }
        const error = answer.json().error;
        if (error === 'slow_down') interval += 5;
        else if (error === 'invalid_grant') {
          flow.spentUnseen = true;
          return;
        } else if (error !== 'authorization_pending') throw new Error(`poll refused: ${answer.body}`);
      }
    }

    async function deviceWorker(browser: WebBrowser): Promise<void> {
      for (let n = 0; n < 50 && !stopping && Date.now() < hardDeadline; n++) {
        const issued = await call('device authorization', () => requestCodeOverHttp(url, tv, SCOPE));
        if (issued.status !== 200) {
          await sleep(300);
          continue;
        }
        const flow = newFlow(issued.json<DeviceAuthorizationResponse>());
        flows.push(flow);
        await approve(browser, flow);
        if (flow.approval === 'confirmed') await pollForTokens(flow);
      }
    }

    async function grantWorker(holder: GrantHolder): Promise<void> {
      for (let n = 0; n < 500 && !stopping && Date.now() < hardDeadline; n++) {
        await sleep(150);
        const answer = await call('token: refresh_token', () => refreshOverHttp(url, tv, holder.current.refresh_token!));
        if (answer.status === 200) {
          holder.current = answer.json<TokenSet>();
          holder.rotations++;
          holder.uncertain = false;
        } else if (answer.status === 503) {
          holder.uncertain = true;
        } else {
          holder.refused = { body: answer.body, afterUncertain: holder.uncertain };
          return;
        }
      }
    }

    async function readers(): Promise<void> {
      for (let n = 0; n < 1000 && !stopping && Date.now() < hardDeadline; n++) {
        await sleep(150);
        const holder = holders[n % GRANTS]!;
        await Promise.all([
          call('introspection', () => introspectOverHttp(url, rs, holder.current.access_token)),
          call('userinfo', () => userinfoOverHttp(url, holder.current.access_token)),
          call('readyz', () => send(`${url}/readyz`)),
          call('healthz', () => send(`${url}/healthz`)),
        ]);
      }
    }

    const traffic = Promise.all([...workerBrowsers.map(deviceWorker), ...holders.map(grantWorker), readers()]);
    // A worker's failure stops the waits below at once and surfaces when the traffic is awaited.
    let trafficFailure: unknown = null;
    traffic.catch((error: unknown) => (trafficFailure = error));
    /** Lets the traffic run for `ms`, or until `done`; fails at once if a worker failed. */
    async function pause(ms: number, done: () => boolean = () => false): Promise<boolean> {
      const end = Date.now() + ms;
      while (Date.now() < end) {
        if (trafficFailure) throw trafficFailure;
        if (done()) return true;
        await sleep(Math.min(100, end - Date.now()));
      }
      return done();
    }
    const approvers: Array<Promise<void>> = [];
    // Whatever fails below, the traffic stops before the cluster is removed.
    const stopTraffic = async () => {
      stopping = true;
      await Promise.all([traffic, ...approvers]);
    };

    try {
      const warm = await pause(30_000, () => flows.filter((f) => f.delivered === 1).length >= 2 && holders.every((c) => c.rotations >= 2));
      expect(warm, 'traffic flows before the outage').toBe(true);

      // Approved before the outages, polled only during and after them.
      const held = await issueFlows(2);
      for (const flow of held) {
        await approve(probeBrowser, flow);
        expect(flow.approval).toBe('confirmed');
      }

      const outages: Outage[] = [];
      for (const mode of ['fast', 'immediate'] as const) {
        // Issued before the outage, approved on the pages one after the other through it.
        const queued = await issueFlows(3);
        const approver = (async () => {
          for (const flow of queued) {
            await approve(approverBrowser, flow);
            if (flow.approval === 'confirmed') await pollForTokens(flow);
          }
        })();
        approver.catch((error: unknown) => (trafficFailure = error));
        approvers.push(approver);

        const downAt = Date.now();
        await database.cluster.stop(mode);
        const stoppedAt = Date.now();

        await expectServedWithoutDatabase(held[0]!);
        await pause(3000); // the traffic keeps hitting the stopped database
        expect(server.child.exitCode, 'the server process stays up').toBeNull();

        const startingAt = Date.now();
        await database.cluster.start();
        const upAt = Date.now();
        const recoveredAt = await waitForRecovery(upAt);
        outages.push({ mode, downAt, stoppedAt, startingAt, upAt, recoveredAt });
        await pause(2000);
      }

      // The held approvals survived both outages and are redeemable exactly once.
      for (const flow of held) {
        await pollForTokens(flow);
        expect(flow.delivered, flow.issued.user_code).toBe(1);
      }

      await pause(1000);
      await stopTraffic();
      await checkTraffic(exchanges, outages);
      await checkDeviceRequests(flows);
      await checkGrants(holders);

      expect(server.child.exitCode).toBeNull();
      // The token metrics never counted the outage as server errors (a grant that failed after
      // client authentication counts as temporarily_unavailable; most fail before, at it).
      const metrics = await send(`${url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
      expect(metrics.body).toContain('device_auth_token_requests_total');
      expect(metrics.body).not.toContain('outcome="server_error"');
      // Nothing was logged as an error: every database failure was an expected 503.
      const errors = server
        .output()
        .split('\n')
        .filter((line) => /"level":(50|60)/.test(line));
      expect(errors).toEqual([]);

      const recoveries = outages.map((o) => ({
        mode: o.mode,
        downMs: o.startingAt - o.downAt,
        startMs: o.upAt - o.startingAt,
        recoveryAfterUpMs: o.recoveredAt - o.upAt,
      }));
      const answers: Record<string, number> = {};
      for (const e of exchanges) answers[`${e.endpoint} ${e.status}`] = (answers[`${e.endpoint} ${e.status}`] ?? 0) + 1;
      console.info(JSON.stringify({ recoveries, flows: flows.length, answers }));
    } finally {
      aborted = true;
      stopping = true;
      // Settled, not awaited: a worker's error must not hide the assertion that failed.
      await Promise.allSettled([traffic, ...approvers]);
    }

    async function issueFlows(count: number): Promise<Flow[]> {
      const issued: Flow[] = [];
      for (let i = 0; i < count; i++) {
        const answer = await requestCodeOverHttp(url, tv, SCOPE);
        expect(answer.status).toBe(200);
        issued.push(newFlow(answer.json<DeviceAuthorizationResponse>()));
      }
      flows.push(...issued);
      return issued;
    }

    /** During the outage: 503 temporarily_unavailable on every OAuth endpoint that needs the database, a 503 page, /readyz fails fast, /healthz and what is in memory answer. */
    async function expectServedWithoutDatabase(heldFlow: Flow): Promise<void> {
      const unknown = (prefix: string) => `${prefix}${randomBytes(32).toString('base64url')}`;
      const oauthRequests: Array<[string, () => Promise<WebResponse>]> = [
        ['POST /oauth/device/code', () => requestCodeOverHttp(url, tv, SCOPE)],
        ['POST /oauth/token (device_code)', () => pollOverHttp(url, tv, heldFlow.issued.device_code)],
        ['POST /oauth/token (refresh_token)', () => refreshOverHttp(url, tv, unknown('da_rt_'))],
        ['POST /oauth/introspect', () => introspectOverHttp(url, rs, unknown('da_at_'))],
        ['POST /oauth/revoke', () => revokeOverHttp(url, tv, unknown('da_rt_'))],
        ['GET /oauth/userinfo', () => userinfoOverHttp(url, unknown('da_at_'))],
      ];
      for (const [name, request] of oauthRequests) {
        const answer = await request();
        expect([name, answer.status, answer.json().error]).toEqual([name, 503, 'temporarily_unavailable']);
        expect(answer.headers.get('retry-after'), name).toBe('5');
        expect(answer.headers.get('cache-control'), name).toBe('no-store');
      }

      const pages = [() => probeBrowser.get('/activate'), () => probeBrowser.post('/activate', { user_code: heldFlow.issued.user_code })];
      for (const page of pages) {
        const answer = await page();
        expect(answer.status).toBe(503);
        expect(answer.headers.get('content-type')).toMatch(/^text\/html/);
        expect(answer.body).toContain('Temporarily unavailable');
        expect(answer.headers.get('retry-after')).toBe('5');
      }

      const started = Date.now();
      const ready = await send(`${url}/readyz`);
      expect(Date.now() - started).toBeLessThan(READYZ_BOUND_MS);
      expect([ready.status, ready.json()]).toEqual([503, { status: 'unavailable', reason: 'database unreachable' }]);
      for (const path of ['/healthz', '/.well-known/openid-configuration', '/.well-known/jwks.json']) {
        expect([path, (await send(`${url}${path}`)).status]).toEqual([path, 200]);
      }
    }

    /** Polls until /readyz and a device authorization request succeed again; returns when. */
    async function waitForRecovery(upAt: number): Promise<number> {
      for (let attempt = 0; attempt < 200; attempt++) {
        const [ready, issued] = await Promise.all([send(`${url}/readyz`), requestCodeOverHttp(url, tv, SCOPE)]);
        if (ready.status === 200 && issued.status === 200) return Date.now();
        if (Date.now() - upAt > RECOVERY_BOUND_MS) throw new Error(`not recovered ${RECOVERY_BOUND_MS} ms after the database returned`);
        await sleep(50);
      }
      throw new Error('not recovered');
    }
  }, 180_000);

  /** No 500 and no unanswered request; every 503 is temporarily_unavailable with Retry-After, and only while the database was away. */
  async function checkTraffic(exchanges: Exchange[], outages: Outage[]): Promise<void> {
    expect(exchanges.filter((e) => e.status === 'no answer' || (e.status >= 500 && e.status !== 503))).toEqual([]);

    const unavailable = exchanges.filter((e) => e.status === 503);
    // A request that began before the stop may be answered 503 if its connection was cut.
    const duringAnOutage = (e: Exchange) => outages.some((o) => e.at + e.ms >= o.downAt && e.at <= o.recoveredAt);
    expect(unavailable.filter((e) => !duringAnOutage(e))).toEqual([]);
    // The loops that never pause saw the outage (each endpoint's answer is also checked one by one
    // during it); the device flows saw it at whichever step each was in.
    const seen = (endpoints: string[]) => unavailable.filter((e) => endpoints.includes(e.endpoint)).length;
    for (const endpoint of ['token: refresh_token', 'introspection', 'userinfo', 'readyz']) {
      expect(seen([endpoint]), `503s seen on ${endpoint}`).toBeGreaterThan(0);
    }
    expect(seen(['device authorization', 'approval pages', 'token: device_code']), '503s seen by the device flows').toBeGreaterThan(0);
    for (const e of unavailable.filter((x) => x.endpoint.startsWith('token') || ['device authorization', 'introspection', 'userinfo'].includes(x.endpoint))) {
      expect([e.endpoint, e.error, e.retryAfter]).toEqual([e.endpoint, 'temporarily_unavailable', '5']);
    }

    // /healthz never depends on the database; /readyz fails only while it is away, and fast.
    expect(exchanges.filter((e) => e.endpoint === 'healthz' && e.status !== 200)).toEqual([]);
    const readiness = exchanges.filter((e) => e.endpoint === 'readyz');
    expect(readiness.filter((e) => e.status === 503 && !duringAnOutage(e))).toEqual([]);
    expect(Math.max(...readiness.map((e) => e.ms))).toBeLessThan(READYZ_BOUND_MS);
    for (const o of outages) {
      const whileDown = readiness.filter((e) => e.at >= o.stoppedAt && e.at + e.ms <= o.startingAt);
      expect(whileDown.length, `readiness probes during the ${o.mode} outage`).toBeGreaterThan(0);
      expect(whileDown.filter((e) => e.status !== 503)).toEqual([]);
      expect(o.recoveredAt - o.upAt).toBeLessThan(RECOVERY_BOUND_MS);
    }
  }

  async function checkDeviceRequests(flows: Flow[]): Promise<void> {
    const db = database.handle.db;
    // No device request delivered tokens twice.
    expect(flows.filter((f) => f.delivered > 1)).toEqual([]);
    for (const flow of flows.filter((f) => f.delivered === 1)) {
      const again = await pollOverHttp(server.url, tv, flow.issued.device_code);
      expect([again.status, again.json().error]).toEqual([400, 'invalid_grant']);
    }

    // No approved request lost its approval: each one is redeemed with a grant. If the device did
    // not get its tokens, that is only because its poll was answered 503 while the redemption committed.
    const rows = await db.selectFrom('device_requests').select(['device_code_hash', 'status', 'grant_id']).execute();
    const byHash = new Map(rows.map((r) => [Buffer.from(r.device_code_hash).toString('hex'), r]));
    for (const flow of flows.filter((f) => f.approval === 'confirmed')) {
      const row = byHash.get(Buffer.from(hashOpaque(flow.issued.device_code)).toString('hex'));
      if (row?.status === 'approved') {
        // Still approved: the worker ran out of time. Redeemable now, once.
        const late = await pollOverHttp(server.url, tv, flow.issued.device_code);
        expect(late.status, late.body).toBe(200);
        flow.delivered++;
        continue;
      }
      expect([flow.issued.user_code, row?.status, row?.grant_id === null]).toEqual([flow.issued.user_code, 'redeemed', false]);
      if (flow.delivered === 0)
        expect({ spentUnseen: flow.spentUnseen, ambiguousPoll: flow.ambiguousPoll }).toEqual({ spentUnseen: true, ambiguousPoll: true });
    }

    // One grant per redeemed request, never two.
    const counts = await sql<{ redeemed: string; without_grant: string; grants: string; shared_grants: string }>`
      SELECT (SELECT count(*) FROM device_requests WHERE status = 'redeemed') AS redeemed,
             (SELECT count(*) FROM device_requests WHERE status = 'redeemed' AND grant_id IS NULL) AS without_grant,
             (SELECT count(*) FROM grants) AS grants,
             (SELECT count(*) FROM (SELECT grant_id FROM device_requests WHERE grant_id IS NOT NULL GROUP BY grant_id HAVING count(*) > 1) s) AS shared_grants`.execute(
      db,
    );
    const c = counts.rows[0]!;
    expect(Number(c.without_grant)).toBe(0);
    expect(Number(c.shared_grants)).toBe(0);
    expect(Number(c.grants)).toBe(Number(c.redeemed));
  }

  async function checkGrants(holders: GrantHolder[]): Promise<void> {
    const db = database.handle.db;
    // Every grant names as current a token the grant was given (a rotation never half-happened).
    const dangling = await sql<{ grant_id: string }>`
      SELECT l.grant_id FROM grants l
      WHERE l.current_refresh_hash IS NOT NULL
        AND NOT EXISTS (SELECT 1 FROM refresh_tokens r WHERE r.token_hash = l.current_refresh_hash AND r.grant_id = l.grant_id)`.execute(db);
    expect(dangling.rows).toEqual([]);

    for (const holder of holders) {
      expect(holder.rotations).toBeGreaterThan(0);
      if (holder.refused) {
        // Only a rotation that committed while the client got a 503, then a replay of the old token.
        expect(holder.refused.afterUncertain, holder.refused.body).toBe(true);
        continue;
      }
      // The token the client holds is the one its grant names as current, and it still works.
      const grant = await db
        .selectFrom('grants')
        .select('current_refresh_hash')
        .where('grant_id', '=', (eb) => eb.selectFrom('refresh_tokens').select('grant_id').where('token_hash', '=', hashOpaque(holder.current.refresh_token!)))
        .executeTakeFirstOrThrow();
      expect(Buffer.from(grant.current_refresh_hash ?? []).toString('hex')).toEqual(Buffer.from(hashOpaque(holder.current.refresh_token!)).toString('hex'));
      expect((await refreshOverHttp(server.url, tv, holder.current.refresh_token!)).status).toBe(200);
    }
  }
});

function newFlow(issued: DeviceAuthorizationResponse): Flow {
  return { issued, approval: 'none', delivered: 0, ambiguousPoll: false, spentUnseen: false };
}
