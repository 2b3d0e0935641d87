import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FORM, form, seedClient, seedUser, startTestApp, type TestApp } from '../helpers/app.js';
import { signedInBrowser, type Browser } from '../helpers/browser.js';
import { decide, poll, startDeviceFlow } from '../helpers/device.js';

/**
 * Issue 27 §5: an approval whose device has not yet picked up its tokens shows on the Devices
 * page as waiting (and not also as "No devices are signed in"), can be cancelled there, and
 * Connected apps agrees. A cancellation races the device's redeeming poll: exactly one wins.
 */

let t: TestApp;
let tv: { clientId: string };

beforeAll(async () => {
  t = await startTestApp();
  tv = await seedClient(t, { kind: 'tv', name: 'Living Room TV' });
});
afterAll(() => t.close());

const DEVICES = '/account/devices';
const APPS = '/account/apps';

/** A request of the TV app, approved by `user` on the verification page; the device has not polled yet. */
async function approvedWaiting(user: { userId: string }) {
  const flow = await startDeviceFlow(t, tv.clientId, { platform_name: 'Bedroom TV' });
  expect(await decide(t, flow.user_code, user.userId, 'approve')).toBe('approved');
  return flow;
}

const requestIdOf = (html: string) => /name="request_id" value="([^"]+)"/.exec(html)?.[1];

async function devicePoll(deviceCode: string) {
  t.clock.advance(5);
  return poll(t, tv.clientId, deviceCode);
}

async function userWithBrowser(): Promise<{ user: Awaited<ReturnType<typeof seedUser>>; browser: Browser }> {
  const user = await seedUser(t);
  return { user, browser: await signedInBrowser(t, user) };
}

describe('an approval waiting for its device', () => {
  it('is listed as waiting, with Cancel approval, and the page does not also say "No devices are signed in"; Connected apps lists its app', async () => {
    const { user, browser } = await userWithBrowser();
    const before = await browser.get(DEVICES);
    expect(before.body).toContain('No devices are signed in.');
    await approvedWaiting(user);
    const devices = await browser.get(DEVICES);
    expect(devices.body).toContain('<strong>Waiting for the device</strong>: you approved it <time');
    expect(devices.body).toContain('>less than a minute ago</time>');
    expect(devices.body).not.toContain('No devices are signed in.');
    expect(devices.body).toContain('<form method="post" action="/account/devices/cancel">');
    expect(devices.body).toContain('<button type="submit" class="danger">Cancel approval<span class="visually-hidden"> Living Room TV</span></button>');
    const apps = await browser.get(APPS);
    expect(apps.body).not.toContain('No apps have access to your account.');
    expect(apps.body).toContain('<h2 class="app-name">Living Room TV</h2>');
    expect(apps.body).toContain('0 devices · 1 waiting to sign in · <a href="/account/devices">See devices</a>');
    expect(apps.body).not.toContain('Last used');
  });

  it('Cancel takes the approval back: the page says so, the device hears access_denied and never gets tokens, Connected apps no longer lists it', async () => {
    const { user, browser } = await userWithBrowser();
    const flow = await approvedWaiting(user);
    const requestId = requestIdOf((await browser.get(DEVICES)).body)!;
    const cancelled = await browser.post(`${DEVICES}/cancel`, { request_id: requestId });
    expect(cancelled.statusCode).toBe(303);
    expect(cancelled.headers.location).toBe(`${DEVICES}?cancelled=${requestId}`);
    const page = await browser.follow(cancelled);
    expect(page.body).toContain('Cancelled the approval of Living Room TV: it will not be signed in.');
    expect(page.body).not.toContain('Waiting for the device</strong>');
    expect(page.body).toContain('No devices are signed in.');
    for (let i = 0; i < 2; i++) {
      const answer = await devicePoll(flow.device_code);
      expect(answer.statusCode).toBe(400);
      expect(answer.json().error).toBe('access_denied');
    }
    expect((await browser.get(APPS)).body).toContain('No apps have access to your account.');
    // Twice: the second finds nothing waiting, says so, and changes nothing.
    const again = await browser.post(`${DEVICES}/cancel`, { request_id: requestId });
    expect(again.statusCode).toBe(404);
    expect(again.body).toContain('That approval is no longer waiting, so nothing was cancelled.');
  });

  it('another user cannot cancel it, a forged form cannot, and a malformed id is refused with a clear error; the approval still works', async () => {
    const { user, browser } = await userWithBrowser();
    const flow = await approvedWaiting(user);
    const requestId = requestIdOf((await browser.get(DEVICES)).body)!;
    const { browser: stranger } = await userWithBrowser();
    await stranger.get(DEVICES);
    const theirs = await stranger.post(`${DEVICES}/cancel`, { request_id: requestId });
    expect(theirs.statusCode).toBe(404);
    expect((await browser.post(`${DEVICES}/cancel`, { request_id: requestId }, { csrfToken: null })).statusCode).toBe(403);
    for (const bad of ['not-an-id', '0', '-1', '9223372036854775808', `${requestId}\u0000`, '\ud800']) {
      const res = await browser.post(`${DEVICES}/cancel`, { request_id: bad });
      expect(res.statusCode, bad).toBe(400);
      expect(res.body).toContain('could not be read');
    }
    expect((await devicePoll(flow.device_code)).statusCode).toBe(200);
  });

  it('the page is signed in only: a visitor is sent to sign in and nothing is cancelled', async () => {
    const { user } = await userWithBrowser();
    const flow = await approvedWaiting(user);
    const res = await t.app.inject({ method: 'POST', url: `${DEVICES}/cancel`, headers: FORM, payload: form({ request_id: '1' }) });
    expect(res.statusCode).toBe(403);
    expect((await devicePoll(flow.device_code)).statusCode).toBe(200);
  });

  it("Remove access on Connected apps also cancels the app's waiting approvals", async () => {
    const { user, browser } = await userWithBrowser();
    const flow = await approvedWaiting(user);
    await browser.get(APPS);
    const removed = await browser.post(`${APPS}/remove`, { client_id: tv.clientId });
    expect(removed.statusCode).toBe(303);
    expect((await browser.follow(removed)).body).toContain('Living Room TV no longer has access to your account.');
    expect((await devicePoll(flow.device_code)).json().error).toBe('access_denied');
    expect((await browser.get(DEVICES)).body).not.toContain('Waiting for the device</strong>');
  });

  it("a cancellation and the device's poll at once: exactly one wins, never both", async () => {
    const outcomes = { cancelled: 0, signedIn: 0 };
    for (let round = 0; round < 6; round++) {
      const { user, browser } = await userWithBrowser();
      const flow = await approvedWaiting(user);
      const requestId = requestIdOf((await browser.get(DEVICES)).body)!;
      t.clock.advance(5);
      const [cancel, answer] = await Promise.all([browser.post(`${DEVICES}/cancel`, { request_id: requestId }), poll(t, tv.clientId, flow.device_code)]);
      if (cancel.statusCode === 303) {
        outcomes.cancelled++;
        expect(answer.statusCode, answer.body).toBe(400);
        expect(['access_denied', 'invalid_grant']).toContain(answer.json().error);
        expect((await devicePoll(flow.device_code)).json().error).toBe('access_denied');
        expect((await browser.get(DEVICES)).body).toContain('No devices are signed in.');
      } else {
        outcomes.signedIn++;
        expect(cancel.statusCode).toBe(404);
        expect(answer.statusCode, answer.body).toBe(200);
        const page = await browser.get(DEVICES);
        expect(page.body).not.toContain('Waiting for the device</strong>');
        expect(page.body).toContain('name="grant_id"');
      }
    }
    expect(outcomes.cancelled + outcomes.signedIn).toBe(6);
  });
});
