import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createCliTarget, runProgram, type CliTarget } from '../helpers/cli.js';

/**
 * Issue 31 §2: `device-auth policy set|list|report` and `device-auth assessment`, run as the real
 * program (with no server running: the CLI's in-process admin API on the database; with one, the
 * same routes through its socket or ADMIN_URL). A bad value is one line on stderr, exit 2, and
 * nothing stored.
 */

vi.setConfig({ testTimeout: 180_000, hookTimeout: 120_000 });

let target: CliTarget;
let clientId: string;
const cli = (args: string[]) => runProgram(args, target.env, 120_000);
const lines = (stdout: string) =>
  stdout
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as Record<string, any>);

beforeAll(async () => {
  target = await createCliTarget();
  const created = await cli(['client', 'create', '--name', 'Living Room TV', '--kind', 'tv', '--type', 'public']);
  expect(created.code, created.stderr).toBe(0);
  clientId = JSON.parse(created.stdout).client_id;
});
afterAll(() => target.cleanup());

describe('device-auth policy', () => {
  it('set: a global rule, an app rule with its values (AS numbers written either way); list and report show them', async () => {
    const global = await cli(['policy', 'set', 'device-hosting', 'report-only']);
    expect(global.code, global.stderr).toBe(0);
    expect(JSON.parse(global.stdout)).toMatchObject({ rule: 'device-hosting', client_id: null, mode: 'report-only', refused: 0, would_have_refused: 0 });
    const countries = await cli(['policy', 'set', 'device-countries', 'enforce', '--client', clientId, '--block', 'KR,CN']);
    expect(countries.code, countries.stderr).toBe(0);
    expect(JSON.parse(countries.stdout)).toMatchObject({ client_id: clientId, countries_block: ['KR', 'CN'], countries_allow: null });
    const asns = await cli(['policy', 'set', 'device-asns', 'enforce', '--client', clientId, '--block', '16509, AS14061']);
    expect(asns.code, asns.stderr).toBe(0);
    expect(JSON.parse(asns.stdout).asns_block).toEqual([16509, 14061]);

    const listed = await cli(['policy', 'list', '--client', clientId]);
    expect(listed.code, listed.stderr).toBe(0);
    expect(lines(listed.stdout).map((r) => [r.rule, r.client_id, r.mode])).toEqual([
      ['device-hosting', null, 'report-only'],
      ['device-asns', clientId, 'enforce'],
      ['device-countries', clientId, 'enforce'],
    ]);
    const report = await cli(['policy', 'report']);
    expect(report.code, report.stderr).toBe(0);
    for (const line of lines(report.stdout)) expect(Object.keys(line).sort()).toEqual(['client_id', 'mode', 'refused', 'rule', 'set_at', 'would_have_refused']);
  });

  it.each([
    ['an unknown country in the list', ['device-countries', 'enforce', '--block', 'DE,XX'], 'ISO 3166-1 alpha-2'],
    ['an AS number beyond 4294967295', ['device-asns', 'enforce', '--block', '4294967296'], 'asns_block'],
    ['an AS number that is no number', ['device-asns', 'enforce', '--block', '16509,AWS'], 'is not an AS number'],
    ['an unknown scope', ['device-scopes', 'enforce', '--allow', 'openid admin'], 'scopes'],
    ['an unknown mode', ['device-flow', 'on'], 'mode'],
    ['an unknown rule', ['device-everything', 'enforce'], 'rule'],
    ['an enforced rule without its values', ['device-asns', 'enforce'], 'device-asns needs asns_block'],
    ['a flag of another rule', ['device-hosting', 'enforce', '--block', 'KR'], 'takes no --allow or --block'],
  ])('%s: one line, exit 2', async (_what, args, said) => {
    const refused = await cli(['policy', 'set', ...args]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain(said);
    expect(refused.stderr.trim().split('\n')).toHaveLength(1);
  });

  it('an app that does not exist: exit 2, saying how to find one', async () => {
    const refused = await cli(['policy', 'set', 'device-flow', 'enforce', '--client', 'no-such-app']);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('no client no-such-app');
  });

  it('none of the refused commands stored anything: the rules are the three set above, unchanged', async () => {
    const listed = await cli(['policy', 'list']);
    expect(lines(listed.stdout).map((r) => [r.rule, r.client_id, r.mode, r.countries_block ?? r.asns_block])).toEqual([
      ['device-hosting', null, 'report-only', null],
      ['device-asns', clientId, 'enforce', [16509, 14061]],
      ['device-countries', clientId, 'enforce', ['KR', 'CN']],
    ]);
  });
});

describe('device-auth assessment', () => {
  it('one JSON line per RFC 10027 mitigation, with its state; a report-only rule left in place is named', async () => {
    const assessed = await cli(['assessment']);
    expect(assessed.code, assessed.stderr).toBe(0);
    const byId = Object.fromEntries(lines(assessed.stdout).map((m) => [m.id, m]));
    expect(Object.keys(byId)).toEqual(
      expect.arrayContaining(['proximity_at_approval', 'proximity_at_redemption', 'code_lifetime', 'scope_limits_per_app', 'report_only_rules']),
    );
    expect(byId.report_only_rules).toMatchObject({ state: 'attention', detail: expect.stringContaining('device-hosting report-only (every app)') });
    expect(byId.device_requests_by_origin!.state).toBe('in_place');
  });
});
