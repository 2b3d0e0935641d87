/**
 * The load generator: one process (pinned by run.ts to the core the server does not have),
 * `node --import tsx test/bench/load.ts '<LoadSpec as JSON>'`. Keeps `connections` keep-alive
 * connections busy, one request at a time each, first for the warm-up and then for the measured
 * window; prints one LoadResult as JSON on stdout. Marks the measured window on stderr
 * (`@@mark start` / `@@mark end`) so that run.ts can read the server's CPU time at both ends.
 */
import { randomInt } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import {
  AUTH_CODE_VERIFIER,
  basicAuthorization,
  benchToken,
  CEILING_ROWS,
  RS_CLIENT_ID,
  RS_CLIENT_SECRET,
  TV_CLIENT_ID,
  WEB_CLIENT_ID,
  WEB_REDIRECT_URI,
} from './fixtures.js';
import { ProofSupply } from './dpop-proofs.js';
import { KeepAliveConnection, rawRequest, type HttpResponse } from './http-client.js';
import type { LoadResult, LoadSpec, MinuteStats } from './scenarios.js';

const DEVICE_GRANT = encodeURIComponent('urn:ietf:params:oauth:grant-type:device_code');
const ERROR_CODE = /"error":"([a-z_]+)"/;
const REFRESH_TOKEN = /"refresh_token":"([^"]+)"/;

/** A request to send, and what to do with its answer. */
interface Job {
  raw: string;
  /** Called with the response, or null when the request failed in transport. */
  settle?(response: HttpResponse | null, receivedAt: number): void;
}

/** Hands out the next request for connection `w`; null when there is nothing more to send. */
type Source = (w: number, stopAt: number) => Job | null | Promise<Job | null>;

function classify(spec: LoadSpec, response: HttpResponse): string {
  const error = response.status >= 400 ? ERROR_CODE.exec(response.body)?.[1] : undefined;
  if (error) return `${response.status} ${error}`;
  if (spec.kind === 'introspect' && response.status === 200) {
    return response.body.startsWith('{"active":true') ? '200 active' : '200 inactive';
  }
  // openid profile without offline_access: an access token and an ID token, no refresh token.
  if (spec.kind === 'auth-code' && response.status === 200) {
    if (!response.body.includes('"access_token":"') || !response.body.includes('"id_token":"')) return '200 without access or ID token';
    return response.body.includes('"refresh_token"') ? '200 with a refresh token' : '200';
  }
  return String(response.status);
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, Math.max(0, ms)));

interface Counters {
  waitsForDueCode: number;
  grantsLost: number;
  /** poll: codes polled for the first time. */
  firstPolls: number;
  /** auth-code: every code of the pool was handed out. */
  poolExhausted: boolean;
}

/** Proofs for the token endpoint as the server names it (ISSUER is http://127.0.0.1:<port>), for the dpop-* scenarios. */
function proofsFor(spec: LoadSpec): ProofSupply | null {
  if (spec.kind !== 'dpop-poll' && spec.kind !== 'dpop-refresh') return null;
  const proofs = new ProofSupply('POST', `http://127.0.0.1:${spec.port}/oauth/token`);
  // A rough upper bound of what the window takes; at most 8 s of signing, so every proof is still fresh at its use.
  proofs.prepare(Math.min(spec.maxRequests, 250_000), 8000);
  return proofs;
}

function sourceFor(spec: LoadSpec, counters: Counters, proofs: ProofSupply | null): Source {
  const host = `${spec.host}:${spec.port}`;
  // The DPoP header is the only difference between a dpop-* request and its Bearer twin.
  const tokenRequest = (body: string, headers: Record<string, string> = {}) =>
    rawRequest('POST', '/oauth/token', host, proofs ? { ...headers, dpop: proofs.next() } : headers, body);
  switch (spec.kind) {
    case 'form':
      return () => ({ raw: rawRequest('POST', '/ceiling/form', host, {}, `id=${randomInt(1, CEILING_ROWS + 1)}&name=bench`) });
    case 'update':
      return () => ({ raw: rawRequest('POST', '/ceiling/update', host, {}, `id=${randomInt(1, CEILING_ROWS + 1)}`) });
    case 'code': {
      const raw = rawRequest(
        'POST',
        '/oauth/device/code',
        host,
        {},
        `client_id=${TV_CLIENT_ID}&scope=openid%20profile%20email%20offline_access&platform_name=Bench%20TV`,
      );
      return () => ({ raw });
    }
    case 'poll':
    case 'dpop-poll': {
      // Every code waits intervalMs after its answer, as a well-behaved client sleeps `interval`
      // between polls. All codes share the interval, so a FIFO stays ordered by due time. A Bearer
      // poll's request is the same bytes every time, made once; a DPoP poll's carries a new proof.
      const pollOf = (row: number) => `grant_type=${DEVICE_GRANT}&client_id=${TV_CLIENT_ID}&device_code=${benchToken('deviceCode', row)}`;
      const raw = proofs ? (body: string) => tokenRequest(body) : (body: string) => body;
      const due: Array<{ raw: string; dueAt: number }> = [];
      for (let k = 0; k < spec.rows.count; k++) {
        const body = pollOf(spec.rows.offset + k * spec.rows.stride);
        due.push({ raw: proofs ? body : tokenRequest(body), dueAt: 0 });
      }
      let head = 0;
      const take = async (_w: number, stopAt: number): Promise<Job | null> => {
        for (;;) {
          const now = performance.now();
          if (now >= stopAt) return null;
          const next = due[head];
          if (next && next.dueAt <= now) {
            head++;
            if (next.dueAt === 0) counters.firstPolls++;
            if (head > 4096 && head * 2 > due.length) {
              due.splice(0, head);
              head = 0;
            }
            return {
              raw: raw(next.raw),
              settle: (_response, receivedAt) => due.push({ raw: next.raw, dueAt: receivedAt + spec.intervalMs }),
            };
          }
          counters.waitsForDueCode++;
          await sleep(Math.min(next ? next.dueAt - now : 5, stopAt - now));
        }
      };
      return take;
    }
    case 'poll-fast': {
      const raws = Array.from({ length: spec.connections }, (_, w) =>
        tokenRequest(`grant_type=${DEVICE_GRANT}&client_id=${TV_CLIENT_ID}&device_code=${benchToken('fastDeviceCode', spec.rows.offset + w)}`),
      );
      return (w) => ({ raw: raws[w]! });
    }
    case 'refresh':
    case 'dpop-refresh': {
      const spares = spec.refreshGrants.slice(spec.connections);
      const held: Array<string | null> = spec.refreshGrants.slice(0, spec.connections).map((grant) => benchToken('refreshToken', grant));
      return (w) => {
        const token = held[w];
        if (!token) return null;
        return {
          raw: tokenRequest(`grant_type=refresh_token&client_id=${TV_CLIENT_ID}&refresh_token=${token}`),
          settle: (response) => {
            const next = response?.status === 200 ? REFRESH_TOKEN.exec(response.body)?.[1] : undefined;
            if (next) {
              held[w] = next;
              return;
            }
            // invalid_grant here is a bug (each grant has one holder), and after a transport
            // failure the grant's state is unknown: either way, continue on a fresh grant.
            counters.grantsLost++;
            const spare = spares.shift();
            held[w] = spare === undefined ? null : benchToken('refreshToken', spare);
          },
        };
      };
    }
    case 'auth-code': {
      // A code is spent by its first redemption, whatever the answer: each request takes the
      // next one, and when the pool is spent the connections stop rather than send a used code.
      const verifier = encodeURIComponent(AUTH_CODE_VERIFIER);
      const redirectUri = encodeURIComponent(WEB_REDIRECT_URI);
      let next = 0;
      return () => {
        if (next >= spec.rows.count) {
          counters.poolExhausted = true;
          return null;
        }
        const code = benchToken('authorizationCode', spec.rows.offset + next++ * spec.rows.stride);
        return {
          raw: tokenRequest(`grant_type=authorization_code&client_id=${WEB_CLIENT_ID}&code=${code}&code_verifier=${verifier}&redirect_uri=${redirectUri}`),
        };
      };
    }
    case 'introspect': {
      const authorization = basicAuthorization(RS_CLIENT_ID, RS_CLIENT_SECRET);
      return () => ({
        raw: rawRequest('POST', '/oauth/introspect', host, { authorization }, `token=${benchToken('accessToken', randomInt(spec.grants))}`),
      });
    }
    case 'userinfo':
      // Odd grants carry openid.
      return () => ({
        raw: rawRequest('GET', '/oauth/userinfo', host, {
          authorization: `Bearer ${benchToken('accessToken', 2 * randomInt(Math.floor(spec.grants / 2)) + 1)}`,
        }),
      });
  }
}

function percentile(sorted: Uint32Array, p: number): number {
  if (sorted.length === 0) return 0;
  const index = Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1);
  return sorted[Math.max(0, index)]! / 1000;
}

async function run(spec: LoadSpec): Promise<LoadResult> {
  const counters: Counters = { waitsForDueCode: 0, grantsLost: 0, firstPolls: 0, poolExhausted: false };
  const proofs = proofsFor(spec);
  const source = sourceFor(spec, counters, proofs);
  const latencies = new Uint32Array(spec.maxRequests);
  const completedAt = spec.timeline ? new Uint32Array(spec.maxRequests) : null;
  const mix = new Map<string, number>();
  const mixAll = new Map<string, number>();
  const count = (map: Map<string, number>, key: string) => map.set(key, (map.get(key) ?? 0) + 1);

  const begin = performance.now();
  // A well-behaved pool's steady state begins once every code has been polled: the first poll of
  // each is also the first write to its row since the data set was seeded and checkpointed, a
  // full-page image in PostgreSQL's WAL that a code polled seconds after its issue never costs.
  const poolSize = spec.kind === 'poll' || spec.kind === 'dpop-poll' ? spec.rows.count : 0;
  const poolCycled = () => counters.firstPolls >= poolSize;
  const warmupLimitMs = poolSize > 0 ? Math.max(spec.warmupMs, spec.warmupLimitMs) : spec.warmupMs;
  let measureFrom = Infinity;
  const startsAt = spec.measureFromEpochMs;
  const untilStart = startsAt === undefined ? warmupLimitMs : Math.max(0, startsAt - Date.now());
  let stopAt = begin + untilStart + spec.durationMs;
  let measured = 0;
  let measureEnd = stopAt;
  let cpuAtStart: NodeJS.CpuUsage | null = null;
  let cycledInWarmup: boolean | null = null;
  const startMeasuring = () => {
    measureFrom = performance.now();
    stopAt = measureFrom + spec.durationMs;
    measureEnd = stopAt;
    cycledInWarmup = poolSize > 0 ? poolCycled() : null;
    cpuAtStart = process.cpuUsage();
    process.stderr.write('@@mark start\n');
  };
  const startTimer = setInterval(() => {
    const elapsed = performance.now() - begin;
    const due = startsAt === undefined ? elapsed >= spec.warmupMs && (poolCycled() || elapsed >= warmupLimitMs) : Date.now() >= startsAt;
    if (due) {
      clearInterval(startTimer);
      startMeasuring();
    }
  }, 10);

  const worker = async (w: number) => {
    const connection = new KeepAliveConnection(spec.host, spec.port);
    for (;;) {
      const job = await source(w, stopAt);
      if (!job || performance.now() >= stopAt) break;
      const sentAt = performance.now();
      let response: HttpResponse | null = null;
      let outcome: string;
      try {
        response = await connection.send(job.raw, spec.timeoutMs);
        outcome = classify(spec, response);
      } catch (error) {
        outcome = `failed: ${error instanceof Error ? error.message : String(error)}`;
      }
      const receivedAt = performance.now();
      job.settle?.(response, receivedAt);
      count(mixAll, outcome);
      if (receivedAt >= measureFrom && receivedAt < stopAt && measured < spec.maxRequests) {
        latencies[measured] = Math.min(0xffffffff, Math.round((receivedAt - sentAt) * 1000));
        if (completedAt) completedAt[measured] = Math.round(receivedAt - measureFrom);
        measured++;
        count(mix, outcome);
        if (measured === spec.maxRequests) {
          stopAt = receivedAt;
          measureEnd = receivedAt;
        }
      }
      // A refused or broken connection: do not spin.
      if (!response) await sleep(20);
    }
    connection.close();
  };

  await Promise.all(Array.from({ length: spec.connections }, (_, w) => worker(w)));
  clearInterval(startTimer);
  const cpu = process.cpuUsage(cpuAtStart ?? undefined);
  process.stderr.write('@@mark end\n');
  const seconds = Number.isFinite(measureFrom) ? Math.max(0.001, (Math.min(measureEnd, performance.now()) - measureFrom) / 1000) : 0.001;

  const sorted = latencies.slice(0, measured).sort();
  const minutes: MinuteStats[] = [];
  if (completedAt) {
    const byMinute = new Map<number, number[]>();
    for (let i = 0; i < measured; i++) {
      const minute = Math.floor(completedAt[i]! / 60_000);
      let bucket = byMinute.get(minute);
      if (!bucket) {
        bucket = [];
        byMinute.set(minute, bucket);
      }
      bucket.push(latencies[i]!);
    }
    for (const [minute, bucket] of [...byMinute].sort((a, b) => a[0] - b[0])) {
      const span = Math.min(60, seconds - minute * 60);
      // A few answers land on the window's very end; a "minute" of a few milliseconds is no minute.
      if (span < 1) continue;
      minutes.push({
        minute,
        requests: bucket.length,
        requestsPerSecond: bucket.length / span,
        p99Ms: percentile(Uint32Array.from(bucket).sort(), 99),
      });
    }
  }
  return {
    label: spec.label,
    kind: spec.kind,
    requests: measured,
    seconds,
    requestsPerSecond: measured / seconds,
    p50Ms: percentile(sorted, 50),
    p90Ms: percentile(sorted, 90),
    p99Ms: percentile(sorted, 99),
    maxMs: percentile(sorted, 100),
    warmupSeconds: ((Number.isFinite(measureFrom) ? measureFrom : performance.now()) - begin) / 1000,
    poolCycledInWarmup: cycledInWarmup,
    mix: Object.fromEntries(mix),
    mixAll: Object.fromEntries(mixAll),
    loadCpu: cpuAtStart ? (cpu.user + cpu.system) / 1e6 / seconds : 0,
    waitsForDueCode: counters.waitsForDueCode,
    grantsLost: counters.grantsLost,
    ...(spec.kind === 'auth-code' ? { poolExhausted: counters.poolExhausted } : {}),
    ...(proofs ? { proofsSignedLive: proofs.signedLive } : {}),
    minutes,
  };
}

const spec = JSON.parse(process.argv[2] ?? '') as LoadSpec;
run(spec).then(
  (result) => process.stdout.write(`${JSON.stringify(result)}\n`),
  (error: unknown) => {
    process.stderr.write(`load generator failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  },
);
