/** What run.ts hands the load generator (as JSON) and what it gets back. */

export type LoadKind =
  /** Ceiling: a bare Fastify route that parses a form and returns JSON. */
  | 'form'
  /** Ceiling: one indexed single-row UPDATE ... RETURNING on a 20,000-row table. */
  | 'update'
  /** POST /oauth/device/code */
  | 'code'
  /** Device grant polls over a pool of pending codes, each no sooner than its interval. */
  | 'poll'
  /** Device grant polls of one code per connection, back to back: slow_down every time. */
  | 'poll-fast'
  /** Refresh grant: one worker per connection, each rotating its own grant. */
  | 'refresh'
  /** poll with a DPoP proof (RFC 9449) on every request: the proof check and its jti's insert come first. */
  | 'dpop-poll'
  /** refresh with a DPoP proof on every request; the access tokens come out DPoP-bound. */
  | 'dpop-refresh'
  /** POST /oauth/introspect of live access tokens drawn across all grants. */
  | 'introspect'
  /** GET /oauth/userinfo with live openid access tokens drawn across all grants. */
  | 'userinfo'
  /** Authorization-code grant: each request redeems a fresh seeded code of the web app, once. */
  | 'auth-code';

export interface LoadSpec {
  label: string;
  kind: LoadKind;
  host: string;
  port: number;
  connections: number;
  warmupMs: number;
  /**
   * poll: the warm-up goes on past warmupMs until every code of the pool has been polled once
   * (at most this long in all), so the measured window sees the pool's steady state.
   */
  warmupLimitMs: number;
  durationMs: number;
  /** Measured requests at most; the run ends at whichever bound comes first. */
  maxRequests: number;
  timeoutMs: number;
  /**
   * poll: the pool is rows offset + k * stride for k < count; poll-fast: rows offset + connection;
   * auth-code: the codes to redeem, rows offset + k * stride for k < count, each once.
   */
  rows: { offset: number; count: number; stride: number };
  /** Live grants [0, grants): introspect and userinfo draw tokens from them. */
  grants: number;
  /** refresh: the grants to rotate, one per connection first, then spares for workers that lose theirs. */
  refreshGrants: number[];
  /** poll: milliseconds a code waits after its answer before it is polled again. */
  intervalMs: number;
  /** Keep a per-request completion time, for per-minute figures (the soak). */
  timeline: boolean;
  /**
   * When set, the measured window begins at this wall-clock time (Date.now()) instead of after the
   * warm-up: bench:ab --together starts both sides' windows at the same instant.
   */
  measureFromEpochMs?: number;
}

export interface MinuteStats {
  minute: number;
  requests: number;
  requestsPerSecond: number;
  p99Ms: number;
}

export interface LoadResult {
  label: string;
  kind: LoadKind;
  requests: number;
  seconds: number;
  requestsPerSecond: number;
  p50Ms: number;
  p90Ms: number;
  p99Ms: number;
  maxMs: number;
  /** How long the warm-up lasted. */
  warmupSeconds: number;
  /** poll: whether every code of the pool was polled once before the measured window began. */
  poolCycledInWarmup: boolean | null;
  /** Measured responses by status and OAuth error code (or transport failure). */
  mix: Record<string, number>;
  /** The same over warm-up and measurement together. */
  mixAll: Record<string, number>;
  /** CPU the generator spent during the measured window, as a share of one core. */
  loadCpu: number;
  /** poll: how often no code was due and a connection waited. */
  waitsForDueCode: number;
  /** refresh: grants given up (invalid_grant or an unknown outcome) and spares taken. */
  grantsLost: number;
  /** dpop-*: proofs signed during the run because the prepared ones ran out (absent in older runs). */
  proofsSignedLive?: number;
  /** auth-code: every code of the pool was sent, so the generator stopped early (absent in older runs). */
  poolExhausted?: boolean;
  minutes: MinuteStats[];
}
