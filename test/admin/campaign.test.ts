import type { LightMyRequestResponse as Response } from 'fastify';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { DeviceAuthorizationResponse } from '../../src/oauth/device/authorization.js';
import { hashOpaque } from '../../src/oauth/opaque-tokens.js';
import { seedClient, seedUser, startTestApp, type TestApp } from '../helpers/app.js';
import type { Browser } from '../helpers/browser.js';
import { sendAll } from '../helpers/flood.js';
import {
  adminCall,
  AMAZON_AS,
  approveOnPage,
  approverBrowser,
  deviceGrant,
  DIGITALOCEAN_AS,
  DIGITALOCEAN_NL,
  EC2_KOREA,
  HETZNER_AS,
  HETZNER_FI,
  HOME_DE,
  HOME_US,
  pollFrom,
  requestFrom,
  startOriginApp,
  type OriginApp,
} from '../helpers/grant-origins.js';
import { deviceCodeFrom, policyAdmin, refusalsMetric, type PolicyAdmin } from '../helpers/policy.js';
import { introspection, refresh, userinfo, type TestClient, type TokenSet } from '../helpers/tokens.js';

/**
 * Issue 31 §4, the campaign, end to end. An EvilToken-style kit asks for a fresh device code from
 * a hosting node whenever a victim clicks its lure: 300 device requests from 60 addresses, twenty
 * each on EC2 in Korea, DigitalOcean in the Netherlands and Hetzner in Finland (as the shipped
 * location data places them; TRUST_PROXY names the loopback balancer, the parties' addresses come
 * in X-Forwarded-For). Ten victims on German home lines approve one code of each node, ticking "in
 * front of me" as the page asks, and the node collects the tokens. Beside them, in the same window
 * and of the same app, ten US households approve five TVs each from their own home line; and the
 * day before, a user approved two devices of their own running on EC2 from the campaign's very
 * first addresses.
 *
 * The operator's rules (device-hosting, and device-asns blocking the three networks) first run in
 * report-only: every answer is as it would be without them, and the report counts what they would
 * have refused. Switched to enforce, the campaign's new requests and the polls of the codes it
 * still holds are refused, and the households' new TVs are not. The admin API then sees the
 * campaign by network, country, hosting flag, signal and window, and one bulk revocation by ASN and
 * approval window revokes every campaign grant and not one legitimate grant: their refresh,
 * userinfo and introspection fail at once on both of two instances.
 */

vi.setConfig({ testTimeout: 240_000, hookTimeout: 120_000 });

/** The campaign's nodes: 20 addresses on each of three hosting networks. */
const NETWORKS = [
  { at: EC2_KOREA, asn: AMAZON_AS, country: 'KR' },
  { at: DIGITALOCEAN_NL, asn: DIGITALOCEAN_AS, country: 'NL' },
  { at: HETZNER_FI, asn: HETZNER_AS, country: 'FI' },
];
const NODES = NETWORKS.flatMap((network) => Array.from({ length: 20 }, (_, i) => network.at(i)));
const CODES_PER_NODE = 5;
const VICTIMS = 10;
const HOUSEHOLDS = 10;
const TVS_PER_HOUSEHOLD = 5;
const CAMPAIGN_ASNS = NETWORKS.map((n) => n.asn);

let o: OriginApp;
let t: TestApp;
let second: TestApp;
let admin: PolicyAdmin;
let tv: TestClient;
let rs: TestClient;
let victims: Browser[];
let households: Browser[];
/** The grants of the day before: the cloud user's own two devices on EC2. */
const dayBefore: TokenSet[] = [];

beforeAll(async () => {
  o = await startOriginApp();
  t = o.t;
  second = await startTestApp({ database: t.database });
  admin = await policyAdmin(t);
  tv = await seedClient(t, { kind: 'tv', name: 'Streaming TV' });
  rs = await seedClient(t, { kind: 'web', type: 'confidential', name: 'Streaming API' });

  const cloudUser = await seedUser(t);
  for (const address of NODES.slice(0, 2)) dayBefore.push(await deviceGrant(t, tv.clientId, address, await approverBrowser(t, address, cloudUser)));
  t.clock.advance(86_400);

  // One sign-in each, one after the other: the password checks are bounded (PASSWORD_CHECKS_QUEUED).
  victims = [];
  for (let i = 0; i < VICTIMS; i++) victims.push(await approverBrowser(t, HOME_DE(i), await seedUser(t)));
  households = [];
  for (let i = 0; i < HOUSEHOLDS; i++) households.push(await approverBrowser(t, HOME_US(i), await seedUser(t)));
});
afterAll(async () => {
  await admin?.close();
  await second?.close();
  await o?.close();
});

/** Each party's browser approves its own requests one after the other; the parties at once. */
async function approveAll(approvals: ReadonlyArray<{ browser: Browser; flow: DeviceAuthorizationResponse }>): Promise<void> {
  const byBrowser = new Map<Browser, DeviceAuthorizationResponse[]>();
  for (const { browser, flow } of approvals) byBrowser.set(browser, [...(byBrowser.get(browser) ?? []), flow]);
  await Promise.all(
    [...byBrowser].map(async ([browser, flows]) => {
      for (const flow of flows) await approveOnPage(browser, flow);
    }),
  );
}

/** Every household asks for a code for each of its TVs, from its home line. */
async function householdRequests(): Promise<Array<{ household: number; flow: DeviceAuthorizationResponse }>> {
  const requests = Array.from({ length: HOUSEHOLDS * TVS_PER_HOUSEHOLD }, (_, i) => ({ household: i % HOUSEHOLDS }));
  const flows = await sendAll(
    requests.map(
      ({ household }) =>
        () =>
          requestFrom(t, tv.clientId, HOME_US(household)),
    ),
  );
  return requests.map(({ household }, i) => ({ household, flow: flows[i]! }));
}

/** The households approve their TVs at home, and each TV collects its tokens there. */
async function householdsSignIn(requests: Array<{ household: number; flow: DeviceAuthorizationResponse }>): Promise<TokenSet[]> {
  await approveAll(requests.map(({ household, flow }) => ({ browser: households[household]!, flow })));
  t.clock.advance(5);
  const polls = await sendAll(
    requests.map(
      ({ household, flow }) =>
        () =>
          pollFrom(t, HOME_US(household), tv.clientId, flow.device_code),
    ),
  );
  return polls.map((poll) => {
    expect(poll.statusCode, poll.body).toBe(200);
    return poll.json() as TokenSet;
  });
}

const statuses = (answers: Response[]) => answers.map((r) => r.statusCode);

describe('§4 a device-code phishing campaign from hosting networks beside legitimate devices', () => {
  it('report-only answers as before and counts what it would refuse; enforce refuses the campaign and not the households; the admin API sees it; one bulk revocation by ASN and window ends exactly its grants on both instances', async () => {
    // --- Report-only: every answer as without the rules, tokens included.
    await admin.rule('device-hosting', 'report-only');
    await admin.rule('device-asns', 'report-only', { asns_block: CAMPAIGN_ASNS });
    const windowStart = t.clock.now().toISOString();

    const lure = NODES.flatMap((node) => Array.from({ length: CODES_PER_NODE }, () => node));
    const campaignCodes = await sendAll(lure.map((node) => () => deviceCodeFrom(t, tv.clientId, node)));
    expect(campaignCodes).toHaveLength(300);
    expect(statuses(campaignCodes)).toEqual(lure.map(() => 200));
    const held = lure.map((node, i) => ({ node, flow: campaignCodes[i]!.json() as DeviceAuthorizationResponse }));
    const firstRequests = await householdRequests();

    // Victim v approves one code of each of six nodes; the node collects the tokens.
    const phished = NODES.map((node, i) => ({ node, flow: held[i * CODES_PER_NODE]!.flow, browser: victims[i % VICTIMS]! }));
    await approveAll(phished);
    const firstTvs = await householdsSignIn(firstRequests);
    const campaignPolls = await sendAll(
      phished.map(
        ({ node, flow }) =>
          () =>
            pollFrom(t, node, tv.clientId, flow.device_code),
      ),
    );
    for (const poll of campaignPolls) expect(poll.statusCode, poll.body).toBe(200);
    const campaign = campaignPolls.map((poll) => poll.json() as TokenSet);

    // Each rule would have refused every campaign request and poll, and no household's.
    const wouldHave = lure.length + phished.length;
    for (const rule of ['device-hosting', 'device-asns']) {
      expect(await admin.counts(rule, null)).toMatchObject({ mode: 'report-only', refused: 0, would_have_refused: wouldHave });
      expect(await refusalsMetric(t, { rule, level: 'global', outcome: 'would_have_refused' })).toBe(wouldHave);
    }

    // --- Enforce: the campaign's new requests and the polls of the codes it holds are refused.
    await admin.rule('device-hosting', 'enforce');
    await admin.rule('device-asns', 'enforce', { asns_block: CAMPAIGN_ASNS });
    const refusedCodes = await sendAll(lure.map((node) => () => deviceCodeFrom(t, tv.clientId, node)));
    for (const answer of refusedCodes) expect([answer.statusCode, answer.json().error]).toEqual([403, 'access_denied']);
    // Each victim falls for one more lure, with a code the kit got before the switch: approved, and its node gets nothing.
    const stillHeld = held.filter((_, i) => i % CODES_PER_NODE !== 0);
    const lastLures = victims.map((browser, v) => ({ browser, flow: stillHeld[v * 6 * (CODES_PER_NODE - 1)]!.flow }));
    await approveAll(lastLures);
    t.clock.advance(5);
    const heldPolls = await sendAll(
      stillHeld.map(
        ({ node, flow }) =>
          () =>
            pollFrom(t, node, tv.clientId, flow.device_code),
      ),
    );
    for (const poll of heldPolls) expect([poll.statusCode, poll.json().error]).toEqual([400, 'access_denied']);
    const lastLureRows = await t.deps.db
      .selectFrom('device_requests')
      .select(['status', 'grant_id'])
      .where(
        'device_code_hash',
        'in',
        lastLures.map(({ flow }) => hashOpaque(flow.device_code)),
      )
      .execute();
    expect(lastLureRows).toEqual(lastLures.map(() => ({ status: 'approved', grant_id: null })));
    // The households' new TVs are answered as before.
    const secondTvs = await householdsSignIn(await householdRequests());
    const refusedNow = lure.length + stillHeld.length;
    for (const rule of ['device-hosting', 'device-asns']) {
      expect(await admin.counts(rule, null)).toMatchObject({ mode: 'enforce', refused: refusedNow, would_have_refused: 0 });
    }
    t.clock.advance(1);
    const windowEnd = t.clock.now().toISOString();
    t.clock.advance(60);

    // --- The admin API sees the campaign by its networks, countries, hosting flag, signals and window.
    const legitimate = [...firstTvs, ...secondTvs];
    const window = `approved_after=${encodeURIComponent(windowStart)}&approved_before=${encodeURIComponent(windowEnd)}`;
    const count = async (filter: string) => (await adminCall(o, 'GET', `/admin/grants/count?${filter}`)).body.count;
    expect(await count(`asn=${AMAZON_AS}`)).toBe(22);
    expect(await count(`asn=${AMAZON_AS}&${window}`)).toBe(20);
    expect(await count(`asn=${CAMPAIGN_ASNS.join(',')}&${window}`)).toBe(60);
    expect(await count('hosting=true&signal=country_mismatch')).toBe(60);
    for (const { country } of NETWORKS) expect(await count(`country=${country}&${window}&live=true`)).toBe(20);
    expect(await count(`hosting=false&${window}`)).toBe(legitimate.length);
    const { body } = await adminCall(o, 'GET', `/admin/grants?asn=${AMAZON_AS}&${window}&limit=1`);
    expect(body.items[0]).toMatchObject({
      requester: { asn: AMAZON_AS, country: 'KR', hosting: true },
      approver: { country: 'DE', hosting: false },
      redeemer: { asn: AMAZON_AS, country: 'KR', hosting: true },
      decision: { action: 'confirm', confirmed: true },
    });

    // --- One bulk revocation by ASN and approval window: every campaign grant, not one legitimate grant.
    const filter = { asn: CAMPAIGN_ASNS, approved_after: windowStart, approved_before: windowEnd };
    const dry = await adminCall(o, 'POST', '/admin/grants/revoke', { ...filter, dry_run: true });
    expect(dry.body.count).toBe(60);
    const done = await adminCall(o, 'POST', '/admin/grants/revoke', filter);
    expect(done).toMatchObject({ status: 200, body: { revoked: 60 } });
    expect(await count('live=true')).toBe(dayBefore.length + legitimate.length);

    for (const instance of [t, second]) {
      for (const tokens of campaign) {
        expect((await userinfo(instance, tokens.access_token)).statusCode).toBe(401);
        expect(await introspection(instance, rs, tokens.access_token)).toEqual({ active: false });
      }
      // The two of the day before have outlived their access tokens (their refresh below still works).
      for (const tokens of legitimate) {
        expect((await userinfo(instance, tokens.access_token)).statusCode).toBe(200);
        expect(await introspection(instance, rs, tokens.access_token)).toMatchObject({ active: true });
      }
    }
    // Refresh spends the token, so each grant is tried once, alternating instances.
    for (const [i, tokens] of campaign.entries()) {
      const res = await refresh(i % 2 === 0 ? t : second, tv, tokens.refresh_token!);
      expect([res.statusCode, res.json().error]).toEqual([400, 'invalid_grant']);
    }
    for (const [i, tokens] of [...dayBefore, ...legitimate].entries()) {
      const res = await refresh(i % 2 === 0 ? t : second, tv, tokens.refresh_token!);
      expect(res.statusCode, res.body).toBe(200);
    }
    const revoked = await t.deps.db.selectFrom('events').select(['reason', 'data']).where('type', '=', 'grant.revoked').execute();
    expect(revoked).toHaveLength(60);
    for (const event of revoked) expect(event).toEqual({ reason: 'operator_revoked', data: { operation_id: done.body.operation_id } });
  });
});
