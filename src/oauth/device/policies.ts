import type { Logger } from 'pino';
import type { ChannelSubscription, Database, DatabaseHandle } from '../../db/connect.js';
import { describeUnavailable, isDatabaseUnavailable } from '../../db/unavailable.js';
import type { Clock } from '../../lib/clock.js';
import type { Metrics } from '../../lib/metrics.js';
import { addDevicePolicyCounts, listDevicePolicyRules, type AppCounts, type StoredPolicyRow } from '../../repositories/device-policy.js';
import { basePolicy, resolvePolicy, type DevicePolicy, type PolicyRule, type RuleName } from './policy.js';
import type { ProximityRules } from './proximity.js';

/** The channel on which a trigger announces, on commit, every change of a device policy rule. */
const DEVICE_POLICY_CHANNEL = 'device_auth_policy_changes';

/**
 * While not listening (the listener's connection lost), the rules are read again this often, so
 * that a change reaches every instance within 5 s whatever happens to announcements (issue 31 §2).
 */
const POLICY_RELOAD_WHILE_DEAF_MS = 2_000;

/**
 * Counts are added to the rules' rows this often, one UPDATE per rule counted, whatever the number
 * of requests: a flood of refused requests costs memory increments, not writes. The same
 * statement records, per app, one device_request.refused event of what the rule refused (or, in
 * report-only, would have refused) since the last flush.
 */
const POLICY_COUNT_FLUSH_MS = 1_000;

/** Resolved policies kept at most: an app's is made again at its next request after a change. */
const RESOLVED_CAPACITY = 10_000;

interface PendingCounts {
  rule: PolicyRule;
  refused: number;
  wouldHaveRefused: number;
  /** The last thing counted, for the log line: what the rule held against a request. */
  lastDetail: string;
  /** The same, per app whose requests were counted: each app's event. */
  apps: Map<string, AppCounts>;
}

/** A stored row as the domain reads it. */
export function ruleFromRow(row: StoredPolicyRow): PolicyRule {
  return {
    ruleId: row.rule_id,
    clientId: row.client_id,
    rule: row.rule as RuleName,
    mode: row.mode,
    scopes: row.scopes,
    countryList: row.country_list,
    countries: row.countries,
    asns: row.asns?.map(Number) ?? null,
    proximityAction: row.proximity_action,
    revision: row.revision,
    setAt: row.set_at,
    refused: row.refused,
    wouldHaveRefused: row.would_have_refused,
  };
}

/**
 * Every instance's copy of the device policy rules, in memory: resolving a request's policy costs
 * no round trip. Every change, by any instance or the CLI, is announced on commit and read again
 * at once; the instance that made it reads it before it answers (load()), so a request that
 * arrives after the change was acknowledged is judged by it.
 */
export class DevicePolicies {
  #rules: readonly PolicyRule[] = [];
  readonly #resolved = new Map<string, DevicePolicy>();
  readonly #base: DevicePolicy;
  /** Loads are numbered as they start; one that started before the last applied is stale and dropped. */
  #loadsStarted = 0;
  #lastApplied = 0;
  #listening = false;
  #subscription: ChannelSubscription | null = null;
  #reloadTimer: NodeJS.Timeout | null = null;
  #flushTimer: NodeJS.Timeout | null = null;
  readonly #pending = new Map<string, PendingCounts>();
  #flushing: Promise<void> | null = null;

  constructor(
    private readonly db: Database,
    proximity: ProximityRules,
    private readonly log: Logger,
    private readonly metrics: Metrics,
    private readonly clock: Clock,
  ) {
    // The base policy holds no rule, so it never counts: every app's own policy counts for it.
    this.#base = basePolicy({ proximityPolicy: proximity.proximityPolicy, sameNetworkIpv6Prefix: proximity.sameNetworkIpv6Prefix }, () => {});
  }

  /** The policy of one app's request: its rules and the global ones, with the proximity overrides applied. */
  resolve(clientId: string): DevicePolicy {
    const known = this.#resolved.get(clientId);
    if (known) return known;
    const policy = resolvePolicy(this.#rules, clientId, this.#base, (rule, detail) => this.#count(rule, detail, clientId));
    if (this.#resolved.size >= RESOLVED_CAPACITY) this.#resolved.clear();
    this.#resolved.set(clientId, policy);
    return policy;
  }

  /** The rules as this instance last read them. */
  get rules(): readonly PolicyRule[] {
    return this.#rules;
  }

  /** Reads every rule again; a load overtaken by one that started later changes nothing. */
  async load(): Promise<void> {
    const started = ++this.#loadsStarted;
    const rows = await listDevicePolicyRules(this.db);
    if (started < this.#lastApplied) return;
    this.#lastApplied = started;
    this.#rules = rows.map(ruleFromRow);
    this.#resolved.clear();
  }

  /** Listens to rule changes and flushes counts until close(). */
  async follow(database: DatabaseHandle): Promise<void> {
    const failed = (error: unknown) => {
      if (isDatabaseUnavailable(error)) this.log.info(describeUnavailable(error), 'reading the device policy failed: the database is away; trying again');
      else this.log.warn({ err: error }, 'reading the device policy failed; trying again');
    };
    const reload = () => void this.load().catch(failed);
    await this.load();
    this.#subscription = await database.listen(DEVICE_POLICY_CHANNEL, {
      onNotification: reload,
      onListening: () => {
        this.#listening = true;
        // Whatever changed while not listening is read now.
        reload();
      },
      onListeningLost: (reason) => {
        this.#listening = false;
        this.log.info(describeUnavailable(reason), `not listening to device policy changes; the rules are read every ${POLICY_RELOAD_WHILE_DEAF_MS / 1000} s`);
      },
    });
    this.#reloadTimer = setInterval(() => {
      if (!this.#listening) reload();
    }, POLICY_RELOAD_WHILE_DEAF_MS);
    this.#reloadTimer.unref();
    this.#flushTimer = setInterval(() => void this.flush(), POLICY_COUNT_FLUSH_MS);
    this.#flushTimer.unref();
  }

  #count(rule: PolicyRule, detail: string, clientId: string): void {
    const enforced = rule.mode === 'enforce';
    this.metrics.devicePolicyRefusals.inc({
      rule: rule.rule,
      level: rule.clientId === null ? 'global' : 'app',
      outcome: enforced ? 'refused' : 'would_have_refused',
    });
    const key = `${rule.ruleId}:${rule.revision}`;
    let pending = this.#pending.get(key);
    if (!pending) {
      pending = { rule, refused: 0, wouldHaveRefused: 0, lastDetail: detail, apps: new Map() };
      this.#pending.set(key, pending);
    }
    let app = pending.apps.get(clientId);
    if (!app) {
      app = { clientId, refused: 0, wouldHaveRefused: 0, lastDetail: detail };
      pending.apps.set(clientId, app);
    }
    for (const counts of [pending, app]) {
      if (enforced) counts.refused++;
      else counts.wouldHaveRefused++;
      counts.lastDetail = detail;
    }
  }

  /**
   * Adds this instance's counts to the rules' rows: one UPDATE per rule counted since the last
   * flush, and one log line saying what it refused or would have. Counts that cannot be written
   * (the database away) are kept for the next flush.
   */
  async flush(): Promise<void> {
    // A flush under way took its batch before the caller's counts: wait for it, then flush them.
    while (this.#flushing) await this.#flushing;
    this.#flushing = this.#flush().finally(() => (this.#flushing = null));
    return this.#flushing;
  }

  async #flush(): Promise<void> {
    const batch = [...this.#pending.values()];
    this.#pending.clear();
    for (const counts of batch) {
      const { rule } = counts;
      try {
        await addDevicePolicyCounts(this.db, rule.ruleId, rule.revision, [...counts.apps.values()], this.clock.now());
      } catch (error) {
        this.#keep(counts);
        if (!isDatabaseUnavailable(error)) this.log.warn({ err: error }, 'could not add device policy counts; kept for the next flush');
        continue;
      }
      this.log.info(
        {
          device_policy: {
            rule: rule.rule,
            client_id: rule.clientId,
            mode: rule.mode,
            refused: counts.refused,
            would_have_refused: counts.wouldHaveRefused,
            last: counts.lastDetail,
          },
        },
        rule.mode === 'enforce'
          ? `device policy ${rule.rule} refused ${counts.refused} requests`
          : `device policy ${rule.rule} (report-only) would have refused ${counts.wouldHaveRefused} requests`,
      );
    }
  }

  #keep(counts: PendingCounts): void {
    const key = `${counts.rule.ruleId}:${counts.rule.revision}`;
    const pending = this.#pending.get(key);
    if (!pending) {
      this.#pending.set(key, counts);
      return;
    }
    pending.refused += counts.refused;
    pending.wouldHaveRefused += counts.wouldHaveRefused;
    for (const kept of counts.apps.values()) {
      const app = pending.apps.get(kept.clientId);
      if (!app) pending.apps.set(kept.clientId, kept);
      else {
        app.refused += kept.refused;
        app.wouldHaveRefused += kept.wouldHaveRefused;
      }
    }
  }

  async close(): Promise<void> {
    if (this.#reloadTimer) clearInterval(this.#reloadTimer);
    if (this.#flushTimer) clearInterval(this.#flushTimer);
    this.#reloadTimer = this.#flushTimer = null;
    this.#listening = false;
    await this.#subscription?.close();
    this.#subscription = null;
    // What was counted since the last flush is not lost with the process.
    await this.flush().catch(() => {});
  }
}
