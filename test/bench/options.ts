/** Command line of `npm run bench -- [options]` and the sizes and durations each mode implies. */

export interface Options {
  quick: boolean;
  soak: boolean;
  enforce: boolean;
  embedded: boolean;
  scale: boolean;
  connections: number;
  poolSize: number;
  json: string;
  baseline: string | null;
  /** Render this results JSON again (targets and checks recomputed) instead of running. */
  report: string | null;
  /** Scenario ids to run, in this order (the ceilings always run first); null: all. */
  only: string[] | null;
  /**
   * Any database of a PostgreSQL server to run on (BENCH_DATABASE_URL): the run creates its own
   * database there and drops it. null: the run starts a cluster of its own (cluster.ts).
   */
  adminUrl: string | null;
  /** A CPU profile of the server in each PostgreSQL scenario, a fresh server for each (--profile). */
  cpuProfile: boolean;
}

export interface Profile {
  warmupMs: number;
  /** poll: the warm-up lasts until every code of the pool was polled once, at most this long. */
  warmupLimitMs: number;
  /**
   * refresh at scale: the warm-up, long enough for the full-page images that follow the
   * scenario's CHECKPOINT to die down (run.ts, plansFor).
   */
  scaleRefreshWarmupMs: number;
  durationMs: number;
  maxRequests: number;
  /** Pending device requests and live grants of the base data set. */
  rows: number;
  /** Rows of each kind in the scale phase. */
  scaleRows: number;
  /** Codes the pool polls (well-behaved), at most `rows`. */
  pollPool: number;
  /** Authorization codes seeded for the auth-code scenario, each redeemed once (AUTH_CODE_RATE_BOUND). */
  authCodes: number;
  signMs: number;
  soakMs: number;
  /** The whole run ends here, whatever happens. */
  deadlineMs: number;
}

const USAGE = `usage: npm run bench -- [options]
  --quick             a few seconds per scenario, 50,000 rows for scale; targets are not enforced
  --soak              only the 5-minute well-behaved poll run: memory and throughput, first minute against last
  --enforce           exit 1 when a target fails (the benchmark exits 0 otherwise; checks always count)
  --no-embedded       skip the embedded-database scenarios
  --no-scale          skip the 1,000,000-row scenarios
  --connections N     connections the load generator keeps busy (default 64)
  --pool N            DATABASE_POOL_SIZE of the server and the ceilings (default 10)
  --json PATH         where the results go as JSON (default test/bench/results/latest.json)
  --baseline PATH     a previous results JSON to compare with (ratios to the ceilings)
  --report PATH       print the report of an earlier results JSON again, running nothing
  --only IDS          these scenarios only, in this order, e.g. refresh-openid,refresh (ceilings always run):
                      poll, poll-slow_down, refresh, refresh-openid, introspect, userinfo, code, auth-code,
                      dpop-poll, dpop-refresh (the poll and refresh with a DPoP proof on every request)
  --profile           a CPU profile of the server in each PostgreSQL scenario (not the ceilings): a fresh
                      server per scenario under node --cpu-prof, profiles in profiles/ beside the JSON
                      (default test/bench/results/profiles/<scenario>.cpuprofile), a summary of each at
                      the end of the report; skips the embedded database and server RSS; not with --soak
environment:
  BENCH_DATABASE_URL  run on this PostgreSQL server, as it is configured (any database of it: the run
                      creates one of its own and drops it); unset: the run starts a cluster of its own
                      (initdb, shared_buffers a quarter of the memory, on 127.0.0.1) and removes it
  BENCH_POSTGRES_BIN  the folder of initdb and pg_ctl for that cluster (default: pg_config --bindir,
                      the newest /usr/lib/postgresql/N/bin, or PATH)`;

export function parseOptions(argv: string[]): Options {
  const options: Options = {
    quick: false,
    soak: false,
    enforce: false,
    embedded: true,
    scale: true,
    connections: 64,
    poolSize: 10,
    json: 'test/bench/results/latest.json',
    baseline: null,
    only: null,
    report: null,
    adminUrl: process.env.BENCH_DATABASE_URL || null,
    cpuProfile: false,
  };
  const number = (flag: string, value: string | undefined) => {
    const n = Number(value);
    if (!Number.isInteger(n) || n < 1) throw new Error(`${flag} needs a positive whole number\n${USAGE}`);
    return n;
  };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    switch (arg) {
      case '--quick':
        options.quick = true;
        break;
      case '--soak':
        options.soak = true;
        break;
      case '--enforce':
        options.enforce = true;
        break;
      case '--no-embedded':
        options.embedded = false;
        break;
      case '--no-scale':
        options.scale = false;
        break;
      case '--connections':
        options.connections = number(arg, argv[++i]);
        break;
      case '--pool':
        options.poolSize = number(arg, argv[++i]);
        break;
      case '--json':
        options.json = argv[++i] ?? options.json;
        break;
      case '--baseline':
        options.baseline = argv[++i] ?? null;
        break;
      case '--report':
        options.report = argv[++i] ?? null;
        break;
      case '--only':
        options.only = (argv[++i] ?? '').split(',').filter(Boolean);
        break;
      case '--profile':
        options.cpuProfile = true;
        break;
      case '--help':
        process.stdout.write(`${USAGE}\n`);
        process.exit(0);
        break;
      default:
        throw new Error(`unknown option ${arg}\n${USAGE}`);
    }
  }
  if (options.cpuProfile && options.soak) throw new Error(`--profile does not combine with --soak\n${USAGE}`);
  return options;
}

/**
 * auth-code redemptions per second that the server on one core will not reach: each signs an
 * RS256 ID token (1,000-3,000 a second on one core, `RS256 signature alone` in the report) and
 * writes a grant, an access token and an event. The scenario's pool holds this many codes per
 * second of its warm-up and window, so that it does not run out; if it does, the load generator
 * stops sending (never a spent code) and the run warns.
 */
export const AUTH_CODE_RATE_BOUND = 10_000;
const withAuthCodes = (profile: Omit<Profile, 'authCodes'>): Profile => ({
  ...profile,
  authCodes: Math.ceil((AUTH_CODE_RATE_BOUND * (profile.warmupMs + profile.durationMs)) / 1000),
});

export function profileOf(options: Options): Profile {
  if (options.quick) {
    return withAuthCodes({
      warmupMs: 1000,
      warmupLimitMs: 10_000,
      scaleRefreshWarmupMs: 5000,
      durationMs: 3000,
      maxRequests: 500_000,
      // The poll pool stays 20,000 even here: at 1 s a pool of N codes caps the rate at N/s.
      rows: 20_000,
      scaleRows: 50_000,
      pollPool: 20_000,
      signMs: 1000,
      soakMs: 60_000,
      // Bounded, with room for a CI machine several times slower than a quiet one.
      deadlineMs: 15 * 60_000,
    });
  }
  return withAuthCodes({
    warmupMs: 3000,
    warmupLimitMs: 20_000,
    scaleRefreshWarmupMs: 30_000,
    durationMs: 10_000,
    maxRequests: 2_000_000,
    rows: 20_000,
    scaleRows: 1_000_000,
    pollPool: 20_000,
    signMs: 3000,
    soakMs: 5 * 60_000,
    deadlineMs: options.soak ? 12 * 60_000 : 20 * 60_000,
  });
}
