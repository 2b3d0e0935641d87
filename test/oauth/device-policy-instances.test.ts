import { afterEach, describe, expect, it, vi } from 'vitest';
import { FORM, form, seedClient, startTestApp, type TestApp } from '../helpers/app.js';
import { EC2_KOREA, HOME_US, deviceCodeFrom, policyAdmin, pollFrom, type PolicyAdmin } from '../helpers/policy.js';
import { createTestDatabase, type TestDatabase } from '../helpers/database.js';

/**
 * Issue 31 §2 and §4: a rule set on one instance is in force on every other within 5 s (two apps
 * on one database, as two servers would be), and on the instance that acknowledged it for every
 * request that arrives after the acknowledgement, however many were in flight.
 */

vi.setConfig({ testTimeout: 120_000 });

const closing: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const close of closing.splice(0).reverse()) await close();
});

async function instance(database: TestDatabase): Promise<TestApp> {
  const t = await startTestApp({ database, env: { TRUST_PROXY: '127.0.0.1' } });
  closing.push(() => t.close());
  return t;
}

async function adminOf(t: TestApp): Promise<PolicyAdmin> {
  const admin = await policyAdmin(t);
  closing.push(() => admin.close());
  return admin;
}

async function sharedDatabase(): Promise<TestDatabase> {
  const database = await createTestDatabase();
  closing.push(() => database.drop());
  return database;
}

describe('two instances on one database', () => {
  it('a rule set on instance A is in force on instance B within 5 s, for new codes and for polls; switched off, B lets them through again', async () => {
    const database = await sharedDatabase();
    const a = await instance(database);
    const b = await instance(database);
    const tv = await seedClient(a, { kind: 'tv' });
    const pending = await deviceCodeFrom(b, tv.clientId, EC2_KOREA);
    expect(pending.statusCode).toBe(200);
    const { device_code: deviceCode } = pending.json();

    const adminA = await adminOf(a);
    await adminA.rule('device-hosting', 'enforce', { client_id: tv.clientId });
    const acknowledged = Date.now();
    let refusedOnB: number | null = null;
    for (let turn = 0; turn < 500 && Date.now() - acknowledged < 5_000; turn++) {
      if ((await deviceCodeFrom(b, tv.clientId, EC2_KOREA)).statusCode === 403) {
        refusedOnB = Date.now() - acknowledged;
        break;
      }
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    expect(refusedOnB, 'B still answered with a code 5 s after A acknowledged the rule').not.toBeNull();
    b.clock.advance(5);
    expect((await pollFrom(b, tv.clientId, deviceCode, EC2_KOREA)).json()).toMatchObject({ error: 'access_denied' });
    expect((await deviceCodeFrom(b, tv.clientId, HOME_US)).statusCode).toBe(200);

    await adminA.rule('device-hosting', 'off', { client_id: tv.clientId });
    const switchedOff = Date.now();
    let allowedOnB = false;
    for (let turn = 0; turn < 500 && Date.now() - switchedOff < 5_000 && !allowedOnB; turn++) {
      allowedOnB = (await deviceCodeFrom(b, tv.clientId, EC2_KOREA)).statusCode === 200;
      if (!allowedOnB) await new Promise((resolve) => setTimeout(resolve, 10));
    }
    expect(allowedOnB).toBe(true);
  });

  it("both instances' refusals add up in one report, whichever instance is asked", async () => {
    const database = await sharedDatabase();
    const a = await instance(database);
    const b = await instance(database);
    const tv = await seedClient(a, { kind: 'tv' });
    const adminA = await adminOf(a);
    await adminA.rule('device-asns', 'report-only', { asns_block: [16509] });
    // B has heard of the rule once it counts a request against it.
    for (let turn = 0; turn < 500; turn++) {
      await deviceCodeFrom(b, tv.clientId, EC2_KOREA);
      if (b.deps.devicePolicies.rules.length > 0) break;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    await b.deps.devicePolicies.flush();
    const fromB = (await adminA.counts('device-asns', null)).would_have_refused;
    for (let i = 0; i < 3; i++) expect((await deviceCodeFrom(a, tv.clientId, EC2_KOREA)).statusCode).toBe(200);
    for (let i = 0; i < 2; i++) expect((await deviceCodeFrom(b, tv.clientId, EC2_KOREA)).statusCode).toBe(200);
    await b.deps.devicePolicies.flush();
    expect((await adminA.counts('device-asns', null)).would_have_refused).toBe(fromB + 5);
  });
});

describe('a rule switched under load', () => {
  it('100 device requests in flight over real HTTP while the kill switch is set: none that was sent after the acknowledgement gets a code', async () => {
    const t = await startTestApp({ env: { TRUST_PROXY: '127.0.0.1' } });
    closing.push(() => t.close());
    const admin = await adminOf(t);
    const tv = await seedClient(t, { kind: 'tv' });
    const address = await t.app.listen({ host: '127.0.0.1', port: 0 });

    const WORKERS = 10;
    const EACH = 10;
    const answers: { sentAt: number; status: number; error: string | undefined }[] = [];
    let acknowledgedAt = Number.POSITIVE_INFINITY;
    let switching: Promise<void> | null = null;
    const send = async (worker: number) => {
      for (let i = 0; i < EACH; i++) {
        const sentAt = performance.now();
        const res = await fetch(`${address}/oauth/device/code`, {
          method: 'POST',
          headers: { ...FORM, 'x-forwarded-for': `3.34.0.${worker * EACH + i + 1}` },
          body: form({ client_id: tv.clientId }),
          signal: AbortSignal.timeout(30_000),
        });
        const body = (await res.json()) as { error?: string };
        answers.push({ sentAt, status: res.status, error: body.error });
        // The switch is set while the others are still sending.
        if (answers.length === 15 && switching === null) {
          switching = admin.rule('device-flow', 'enforce', { client_id: tv.clientId }).then(() => {
            acknowledgedAt = performance.now();
          });
        }
      }
    };
    await Promise.all(Array.from({ length: WORKERS }, (_, worker) => send(worker)));
    await switching;

    expect(answers).toHaveLength(WORKERS * EACH);
    const afterAck = answers.filter((a) => a.sentAt > acknowledgedAt);
    expect(afterAck.length, 'no request was sent after the acknowledgement: the test proves nothing').toBeGreaterThan(0);
    for (const answer of afterAck) expect(answer).toMatchObject({ status: 400, error: 'unauthorized_client' });
    // Before it, either answer; never anything else.
    for (const answer of answers) expect([200, 400]).toContain(answer.status);
    const refused = answers.filter((a) => a.status === 400).length;
    expect((await admin.counts('device-flow', tv.clientId)).refused).toBe(refused);
  });
});
