import fc from 'fast-check';
import { Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { RequestDurationHistogram } from '../../src/lib/request-durations.js';

const BOUNDS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5];

type Observation = [method: string, route: string, status: number, seconds: number];

/** Both histograms fed the same observations, each on a registry of its own. */
async function exposedBoth(observations: readonly Observation[]) {
  const promRegistry = new Registry();
  const ourRegistry = new Registry();
  const prom = new Histogram({
    name: 'd_seconds',
    help: 'durations "quoted" \\ here',
    labelNames: ['method', 'route', 'status'],
    buckets: BOUNDS,
    registers: [promRegistry],
  });
  const ours = new RequestDurationHistogram('d_seconds', 'durations "quoted" \\ here', BOUNDS, ourRegistry);
  for (const [method, route, status, seconds] of observations) {
    prom.observe({ method, route, status: String(status) }, seconds);
    ours.observe(method, route, status, seconds);
  }
  return { prom: await promRegistry.metrics(), ours: await ourRegistry.metrics(), ourRegistry };
}

/** The exposition with each line's labels sorted and the lines sorted: Prometheus reads neither order. */
function normalised(text: string): string[] {
  return text
    .split('\n')
    .map((line) => {
      const sample = /^(\w+)\{(.*)\} (\S+)$/.exec(line);
      if (!sample) return line;
      const labels = sample[2]!.split(/,(?=\w+=")/).sort();
      return `${sample[1]}{${labels.join(',')}} ${sample[3]}`;
    })
    .sort();
}

describe('the request-duration histogram', () => {
  it('is written out as prom-client writes a histogram: buckets at and past every bound, sums, counts, odd label text', async () => {
    const { prom, ours } = await exposedBoth([
      ['POST', '/oauth/token', 200, 0.0004],
      ['POST', '/oauth/token', 200, 0.001],
      ['POST', '/oauth/token', 400, 0.0025],
      ['GET', 'unmatched', 404, 3],
      ['GET', '/a"b\\c\nd', 200, 2.5],
    ]);
    expect(normalised(ours)).toEqual(normalised(prom));
    expect(ours).toContain('d_seconds_count{method="POST",route="/oauth/token",status="200"} 2');
    expect(ours).toContain('d_seconds_bucket{method="GET",route="unmatched",status="404",le="+Inf"} 1');
  });

  it('agrees with prom-client on any observations', async () => {
    const observation = fc.tuple(
      fc.constantFrom('GET', 'POST', 'HEAD'),
      fc.constantFrom('/oauth/token', '/oauth/introspect', 'unmatched'),
      fc.constantFrom(200, 400, 429, 503),
      fc.oneof(fc.constantFrom(...BOUNDS), fc.double({ min: 0, max: 10, noNaN: true })),
    );
    await fc.assert(
      fc.asyncProperty(fc.array(observation, { maxLength: 50 }), async (observations) => {
        const { prom, ours } = await exposedBoth(observations);
        expect(normalised(ours)).toEqual(normalised(prom));
      }),
      { numRuns: 100 },
    );
  });

  it('starts again from nothing when the registry is reset, and reads as JSON', async () => {
    const { ourRegistry } = await exposedBoth([['POST', '/oauth/token', 200, 0.01]]);
    const [json] = await ourRegistry.getMetricsAsJSON();
    expect(json).toMatchObject({ name: 'd_seconds', type: 'histogram' });
    ourRegistry.resetMetrics();
    expect(await ourRegistry.metrics()).not.toContain('d_seconds_count');
  });
});
