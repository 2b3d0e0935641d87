import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client';
import { BatchedCounter } from './batched-counter.js';
import { RequestDurationHistogram } from './request-durations.js';

export interface PoolStats {
  total: number;
  idle: number;
  waiting: number;
}

/**
 * The service's Prometheus metrics, on a registry of their own (not prom-client's global one),
 * so that every app built in a process — tests build many — counts separately.
 */
export function createMetrics(poolStats: () => PoolStats | null = () => null) {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'device_auth_process_' });

  // The metrics every request of a hot path records are counted on the way without prom-client
  // (RequestDurationHistogram, BatchedCounter) and exposed as prom-client's; the rest are its own.
  const metrics = {
    registry,
    httpRequestDuration: new RequestDurationHistogram(
      'device_auth_http_request_duration_seconds',
      'HTTP request duration by method, route and status',
      [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
      registry,
    ),
    deviceCodesIssued: new BatchedCounter({
      name: 'device_auth_device_codes_issued_total',
      help: 'Device codes issued, by app kind',
      labelNames: ['client_kind'] as const,
      registry,
    }),
    tokenRequests: new BatchedCounter({
      name: 'device_auth_token_requests_total',
      help: 'Token endpoint requests by grant type and outcome (issued, or the OAuth error code): device polls by outcome, tokens issued by grant type, refresh rotations',
      labelNames: ['grant_type', 'outcome'] as const,
      registry,
    }),
    revocationRequests: new BatchedCounter({
      name: 'device_auth_revocation_requests_total',
      help: 'Revocation requests that reached the work (past the limits, the form and the app) by outcome: answered (200, whatever the token was), or the OAuth error code',
      labelNames: ['outcome'] as const,
      registry,
    }),
    introspectionRequests: new BatchedCounter({
      name: 'device_auth_introspection_requests_total',
      help: 'Introspection requests that reached the work (past the limits, the form and the resource server) by outcome: active, inactive, or the OAuth error code',
      labelNames: ['outcome'] as const,
      registry,
    }),
    authorizationResponses: new Counter({
      name: 'device_auth_authorization_responses_total',
      help: 'Answers of the authorization endpoint sent back to web apps: code, or the error code (login_required, access_denied, ...)',
      labelNames: ['outcome'] as const,
      registers: [registry],
    }),
    verificationDecisions: new Counter({
      name: 'device_auth_verification_decisions_total',
      help: 'Decisions on the verification page: approved, denied, cancelled_wrong_phrase',
      labelNames: ['decision'] as const,
      registers: [registry],
    }),
    proximityDecisions: new Counter({
      name: 'device_auth_proximity_decisions_total',
      help: 'Decisions on the approval page by the proximity signal shown (none when the page showed no warning): whether warnings work',
      labelNames: ['decision', 'signal'] as const,
      registers: [registry],
    }),
    platformIconFetches: new Counter({
      name: 'device_auth_platform_icon_fetches_total',
      help: 'Platform icons by outcome: stored (fetched), reused (fetched for the same URL a moment ago), dropped_busy (too many fetches at once), dropped_storage_full (icon storage bound reached), or why the fetch was refused',
      labelNames: ['outcome'] as const,
      registers: [registry],
    }),
    devicePolicyRefusals: new Counter({
      name: 'device_auth_device_policy_refusals_total',
      help: 'Device requests, polls and approvals an operator rule refused (enforce) or would have refused (report-only), by rule and level (global or app)',
      labelNames: ['rule', 'level', 'outcome'] as const,
      registers: [registry],
    }),
    grantRevocations: new Counter({
      name: 'device_auth_grant_revocations_total',
      help: 'Grants revoked, by reason (reuse_detected counts refresh token reuse detections, user_banned the grants a ban ended)',
      labelNames: ['reason'] as const,
      registers: [registry],
    }),
  };

  // The counter's name before "chain" became "grant" (issue 30 §3), kept for one release so that
  // dashboards and alerts can move: the same counts, read from the new counter at each scrape.
  new Counter({
    name: 'device_auth_chain_revocations_total',
    help: 'Deprecated, removed in the next release: the same counts as device_auth_grant_revocations_total',
    labelNames: ['reason'] as const,
    registers: [registry],
    async collect() {
      this.reset();
      for (const { labels, value } of (await metrics.grantRevocations.get()).values) this.inc(labels, value);
    },
  });

  new Gauge({
    name: 'device_auth_db_pool_connections',
    help: 'PostgreSQL pool connections by state (absent on the embedded database)',
    labelNames: ['state'] as const,
    registers: [registry],
    collect() {
      const stats = poolStats();
      if (!stats) return;
      this.set({ state: 'total' }, stats.total);
      this.set({ state: 'idle' }, stats.idle);
      this.set({ state: 'in_use' }, stats.total - stats.idle);
      this.set({ state: 'waiting' }, stats.waiting);
    },
  });

  return metrics;
}

export type Metrics = ReturnType<typeof createMetrics>;
