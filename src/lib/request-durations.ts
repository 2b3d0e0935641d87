import type { Metric, Registry } from 'prom-client';

/** One method, route and status: its counts per bucket (not cumulative; the last is past every bound), sum and count. */
interface Series {
  readonly labels: { method: string; route: string; status: string };
  readonly buckets: Float64Array;
  sum: number;
  count: number;
}

/**
 * The request-duration histogram, counted on the way without prom-client: its `observe` builds a
 * string from the labels and looks it up in an object on every call, which the hot paths felt
 * (docs/benchmarks.md, 2026-11-27 (afternoon)). Here a request finds its series through Maps
 * keyed by the label values themselves, and the registry writes the histogram out as prom-client
 * writes its own (`_bucket` with `le`, `_sum`, `_count`) when it is scraped.
 */
export class RequestDurationHistogram {
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  /** route → method → status → series. */
  readonly #series = new Map<string, Map<string, Map<number, Series>>>();

  constructor(
    readonly name: string,
    readonly help: string,
    private readonly upperBounds: readonly number[],
    registry: Registry,
  ) {
    registry.registerMetric(this as unknown as Metric);
  }

  observe(method: string, route: string, status: number, seconds: number): void {
    let methods = this.#series.get(route);
    if (!methods) {
      methods = new Map();
      this.#series.set(route, methods);
    }
    let statuses = methods.get(method);
    if (!statuses) {
      statuses = new Map();
      methods.set(method, statuses);
    }
    let series = statuses.get(status);
    if (!series) {
      series = { labels: { method, route, status: String(status) }, buckets: new Float64Array(this.upperBounds.length + 1), sum: 0, count: 0 };
      statuses.set(status, series);
    }
    let bucket = 0;
    while (bucket < this.upperBounds.length && seconds > this.upperBounds[bucket]!) bucket++;
    series.buckets[bucket]!++;
    series.sum += seconds;
    series.count++;
  }

  /** In prom-client's form for a histogram; the registry calls it when scraped. */
  get() {
    const values: { labels: Record<string, string | number>; value: number; metricName: string }[] = [];
    for (const methods of this.#series.values()) {
      for (const statuses of methods.values()) {
        for (const series of statuses.values()) {
          let cumulative = 0;
          this.upperBounds.forEach((le, bucket) => {
            cumulative += series.buckets[bucket]!;
            values.push({ labels: { ...series.labels, le }, value: cumulative, metricName: `${this.name}_bucket` });
          });
          values.push({ labels: { ...series.labels, le: '+Inf' }, value: series.count, metricName: `${this.name}_bucket` });
          values.push({ labels: series.labels, value: series.sum, metricName: `${this.name}_sum` });
          values.push({ labels: series.labels, value: series.count, metricName: `${this.name}_count` });
        }
      }
    }
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator };
  }

  reset(): void {
    this.#series.clear();
  }
}
