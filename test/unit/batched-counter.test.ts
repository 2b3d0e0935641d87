import fc from 'fast-check';
import { Counter, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { BatchedCounter } from '../../src/lib/batched-counter.js';

type Increment = [grantType: string, outcome: string, value: number];

function bothCounters() {
  const promRegistry = new Registry();
  const ourRegistry = new Registry();
  const labelNames = ['grant_type', 'outcome'] as const;
  const prom = new Counter({ name: 'r_total', help: 'requests "by" \\ outcome', labelNames, registers: [promRegistry] });
  const ours = new BatchedCounter({ name: 'r_total', help: 'requests "by" \\ outcome', labelNames, registry: ourRegistry });
  const inc = ([grantType, outcome, value]: Increment) => {
    prom.inc({ grant_type: grantType, outcome }, value);
    ours.inc({ grant_type: grantType, outcome }, value);
  };
  return { inc, prom: () => promRegistry.metrics(), ours: () => ourRegistry.metrics() };
}

const sortedLines = (text: string) => text.split('\n').sort();

describe('a batched counter', () => {
  it('exposes what prom-client would, scrape after scrape: the sums so far, each label set apart, odd label text', async () => {
    const both = bothCounters();
    both.inc(['refresh_token', 'issued', 1]);
    both.inc(['refresh_token', 'issued', 1]);
    both.inc(['urn:ietf:params:oauth:grant-type:device_code', 'authorization_pending', 1]);
    expect(sortedLines(await both.ours())).toEqual(sortedLines(await both.prom()));
    both.inc(['refresh_token', 'issued', 2.5]);
    both.inc(['a"b\\c\nd', 'x', 1]);
    const ours = await both.ours();
    expect(sortedLines(ours)).toEqual(sortedLines(await both.prom()));
    expect(ours).toContain('r_total{grant_type="refresh_token",outcome="issued"} 4.5');
    // A scrape that found nothing new changes nothing.
    expect(await both.ours()).toBe(ours);
  });

  it('agrees with prom-client on any increments, scraped at any points', async () => {
    const step = fc.oneof(
      fc.tuple(fc.constantFrom('refresh_token', 'authorization_code'), fc.constantFrom('issued', 'invalid_grant', 'slow_down'), fc.integer({ min: 0, max: 5 })),
      fc.constant('scrape' as const),
    );
    await fc.assert(
      fc.asyncProperty(fc.array(step, { maxLength: 40 }), async (steps) => {
        const both = bothCounters();
        for (const s of steps) {
          if (s === 'scrape') expect(sortedLines(await both.ours())).toEqual(sortedLines(await both.prom()));
          else both.inc(s);
        }
        expect(sortedLines(await both.ours())).toEqual(sortedLines(await both.prom()));
      }),
      { numRuns: 100 },
    );
  });

  it('refuses to go down or to count what is not a number', () => {
    const { inc } = bothCounters();
    expect(() => inc(['refresh_token', 'issued', -1])).toThrow();
    const ours = new BatchedCounter({ name: 'n_total', help: 'n', labelNames: ['outcome'] as const, registry: new Registry() });
    expect(() => ours.inc({ outcome: 'issued' }, Number.NaN)).toThrow('a counter only goes up');
    expect(() => ours.inc({ outcome: 'issued' }, Number.POSITIVE_INFINITY)).toThrow('a counter only goes up');
  });
});
