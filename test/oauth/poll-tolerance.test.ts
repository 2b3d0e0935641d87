import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { seedClient, startTestApp, type TestApp } from '../helpers/app.js';
import { poll, startDeviceFlow } from '../helpers/device.js';
import { freePort } from '../helpers/server-process.js';
import { pollOverHttp, requestCodeOverHttp } from '../helpers/web.js';

/**
 * Issue 29 §4: a poll received at least interval − max(10 % of interval, 500 ms) after the
 * previous one was received is on time; anything sooner is slow_down (+5 s, enforced) as before.
 */

describe('slow_down tolerance, measured on the server clock (interval 2 s)', () => {
  let t: TestApp;
  let tv: { clientId: string };
  const wait = (seconds: number) => t.clock.advance(seconds);
  const pollError = async (deviceCode: string) => (await poll(t, tv.clientId, deviceCode)).json().error;

  beforeAll(async () => {
    t = await startTestApp({ env: { DEVICE_POLL_INTERVAL: '2' } });
    tv = await seedClient(t, { kind: 'tv' });
  });
  afterAll(() => t.close());

  it('a poll received 1.5 s after the previous one (a late previous, a prompt next) is on time', async () => {
    const { device_code, interval } = await startDeviceFlow(t, tv.clientId);
    expect(interval).toBe(2);
    wait(2.4); // the first poll was handled late...
    expect(await pollError(device_code)).toBe('authorization_pending');
    wait(1.6); // ...so the next, sent 2 s after the first was sent, arrives 1.6 s after it was received
    expect(await pollError(device_code)).toBe('authorization_pending');
    wait(1.5);
    expect(await pollError(device_code)).toBe('authorization_pending');
    wait(2);
    expect(await pollError(device_code)).toBe('authorization_pending');
  });

  it('a first poll 1.5 s after issue is on time; 1.4 s is slow_down', async () => {
    const onTime = await startDeviceFlow(t, tv.clientId);
    wait(1.5);
    expect(await pollError(onTime.device_code)).toBe('authorization_pending');
    const early = await startDeviceFlow(t, tv.clientId);
    wait(1.4);
    expect(await pollError(early.device_code)).toBe('slow_down');
  });

  it('a poll 0.5 s after the previous one is still slow_down, and the grown interval (7 s) has its own tolerance (0.7 s)', async () => {
    const { device_code } = await startDeviceFlow(t, tv.clientId);
    wait(2);
    expect(await pollError(device_code)).toBe('authorization_pending');
    wait(0.5);
    expect(await pollError(device_code)).toBe('slow_down'); // interval now 7
    wait(6.2);
    expect(await pollError(device_code)).toBe('slow_down'); // sooner than 7 − 0.7: interval now 12
    wait(10.8); // 12 − 1.2: on time
    expect(await pollError(device_code)).toBe('authorization_pending');
    wait(10.7);
    expect(await pollError(device_code)).toBe('slow_down');
  });
});

describe('slow_down tolerance over real HTTP in real time', () => {
  let t: TestApp;
  let server: string;
  let tv: { clientId: string; clientSecret: string | null };

  beforeAll(async () => {
    const port = await freePort();
    server = `http://127.0.0.1:${port}`;
    t = await startTestApp({ realTime: true, env: { DEVICE_POLL_INTERVAL: '2', ISSUER: server } });
    await t.app.listen({ port, host: '127.0.0.1' });
    tv = await seedClient(t, { kind: 'tv' });
  });
  afterAll(() => t.close());

  it('polls sent exactly 2 s apart never get slow_down; one sent 0.5 s after another does', async () => {
    const issued = await requestCodeOverHttp(server, tv);
    expect(issued.status, issued.body).toBe(200);
    const { device_code, interval } = issued.json<{ device_code: string; interval: number }>();
    expect(interval).toBe(2);
    // Each send is scheduled at issue + 2 s × n, whatever the previous one took: a client's timer.
    const start = Date.now();
    const errors: unknown[] = [];
    for (let n = 1; n <= 4; n++) {
      await sleep(Math.max(0, start + n * interval * 1000 - Date.now()));
      errors.push((await pollOverHttp(server, tv, device_code)).json().error);
    }
    expect(errors).toEqual(['authorization_pending', 'authorization_pending', 'authorization_pending', 'authorization_pending']);
    await sleep(500);
    expect((await pollOverHttp(server, tv, device_code)).json().error).toBe('slow_down');
  });
});
