import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { migrateToLatest } from '../../src/db/migrate.js';
import { ManualClock } from '../../src/lib/clock.js';
import { seedClient, seedUser } from '../helpers/app.js';
import { createCliTarget, runProgram, type CliTarget } from '../helpers/cli.js';
import { seedGrants } from '../helpers/grant-origins.js';

/**
 * Issue 31 §1 and §3 from the command line: `device-auth grants list|count|revoke`, through the
 * admin API like every admin command, with the same filters and the same refusals.
 */

// Each test starts real processes (up to four); on a busy 2-core machine with the embedded database
// one start took 25-30 s.
vi.setConfig({ testTimeout: 240_000, hookTimeout: 120_000 });

let target: CliTarget;
let tvId: string;
const cli = (args: string[]) => runProgram(['grants', ...args], target.env, 120_000);

beforeAll(async () => {
  target = await createCliTarget();
  const handle = await target.open();
  try {
    await migrateToLatest(handle.db);
    const seeding = { deps: { db: handle.db }, clock: new ManualClock(new Date()) };
    const tv = await seedClient(seeding, { kind: 'tv' });
    const user = await seedUser(seeding);
    tvId = tv.clientId;
    await seedGrants(seeding, tv.clientId, user.userId, 3, 64500);
    await seedGrants(seeding, tv.clientId, user.userId, 2, 64501);
  } finally {
    await handle.close();
  }
});
afterAll(() => target.cleanup());

describe('device-auth grants', () => {
  it('count prints {"count": N}; list prints one JSON line a grant with requester, approver, redeemer and decision', async () => {
    const count = await cli(['count', '--asn', '64500', '--country', 'nl', '--hosting', '--live', '--grant-type', 'device_code']);
    expect(count.code, count.stderr).toBe(0);
    expect(JSON.parse(count.stdout)).toEqual({ count: 3 });
    const list = await cli(['list', '--client', tvId, '--asn', '64500', '--asn', '64501', '--approved-after', '2000-01-01T00:00:00Z']);
    expect(list.code, list.stderr).toBe(0);
    const lines = list.stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line));
    expect(lines).toHaveLength(5);
    for (const grant of lines) {
      expect(grant).toHaveProperty('requester');
      expect(grant.requester).toMatchObject({ address: expect.any(String), country: 'NL', hosting: true });
      expect(grant).toHaveProperty('approver', null);
      expect(grant).toHaveProperty('redeemer', null);
      expect(grant).toHaveProperty('decision');
    }
  });

  it('an unknown country, an ASN out of range, or a list with one bad item: one line on stderr, exit 2', async () => {
    for (const [args, said] of [
      [['count', '--country', 'ZZ'], 'not an ISO 3166-1 alpha-2 country code'],
      [['list', '--asn', '64500', '--asn', '4294967296'], '0 to 4294967295'],
      [['revoke', '--signal', 'country_mismatch,nonsense', '--dry-run'], 'signal'],
      [['count', '--hosting', '--no-hosting'], 'give --hosting or --no-hosting, not both'],
    ] as const) {
      const res = await cli([...args]);
      expect(res.code, `${args.join(' ')}: ${res.stderr}`).toBe(2);
      expect(res.stderr.trim().split('\n')).toHaveLength(1);
      expect(res.stderr).toContain(said);
    }
  });

  it('revoke --dry-run counts and shows; revoke then revokes and names the operation; without a filter it is refused', async () => {
    const dry = await cli(['revoke', '--asn', '64500', '--dry-run']);
    expect(dry.code, dry.stderr).toBe(0);
    const dryAnswer = JSON.parse(dry.stdout);
    expect(dryAnswer.count).toBe(3);
    expect(dryAnswer.sample).toHaveLength(3);
    const none = await cli(['revoke', '--live']);
    expect(none.code).toBe(2);
    expect(none.stderr).toContain('at least one condition');
    const done = await cli(['revoke', '--asn', '64500']);
    expect(done.code, done.stderr).toBe(0);
    expect(JSON.parse(done.stdout)).toEqual({ revoked: 3, operation_id: expect.any(String) });
    const left = await cli(['count', '--live']);
    expect(JSON.parse(left.stdout)).toEqual({ count: 2 });
  });
});
