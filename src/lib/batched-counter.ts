import { Counter, type Registry } from 'prom-client';

/** One label set's increments since the last scrape. */
interface Pending {
  readonly labels: Record<string, string>;
  count: number;
  /** Whether the counter has this label set yet: an increment of 0 still makes it appear, as in prom-client. */
  exposed: boolean;
}

/**
 * A prom-client counter for the hot paths: `inc` adds to a plain number found through Maps keyed
 * by the label values themselves, and the counter takes the sums when it is scraped (its collect).
 * prom-client's own `inc` builds a string from the labels and looks it up on every call, which
 * the hot paths felt (docs/benchmarks.md, 2026-11-27 (afternoon)). What is exposed is prom-client's
 * counter, unchanged.
 */
export class BatchedCounter<L extends string> {
  readonly #labelNames: readonly L[];
  /** label value → … → Pending, one level per label name. */
  readonly #byValues = new Map<string, unknown>();
  readonly #pending: Pending[] = [];

  constructor(options: { name: string; help: string; labelNames: readonly L[]; registry: Registry }) {
    if (options.labelNames.length === 0) throw new Error('a batched counter needs at least one label');
    this.#labelNames = options.labelNames;
    const pending = this.#pending;
    new Counter<L>({
      name: options.name,
      help: options.help,
      labelNames: options.labelNames,
      registers: [options.registry],
      collect() {
        for (const entry of pending) {
          if (entry.count === 0 && entry.exposed) continue;
          this.inc(entry.labels as Partial<Record<L, string>>, entry.count);
          entry.count = 0;
          entry.exposed = true;
        }
      },
    });
  }

  inc(labels: Readonly<Record<L, string>>, value = 1): void {
    if (!(value >= 0) || !Number.isFinite(value)) throw new TypeError(`a counter only goes up: ${value}`);
    const names = this.#labelNames;
    let level = this.#byValues;
    for (let index = 0; index < names.length - 1; index++) {
      const key = labels[names[index]!];
      let next = level.get(key) as Map<string, unknown> | undefined;
      if (!next) {
        next = new Map();
        level.set(key, next);
      }
      level = next;
    }
    const last = labels[names[names.length - 1]!];
    let entry = level.get(last) as Pending | undefined;
    if (!entry) {
      entry = { labels: { ...labels }, count: 0, exposed: false };
      level.set(last, entry);
      this.#pending.push(entry);
    }
    entry.count += value;
  }
}
