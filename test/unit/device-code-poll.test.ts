import { describe, expect, it } from 'vitest';
import { DENIAL_TEXT, judgePoll } from '../../src/oauth/grant-types/device-code.rules.js';
import type { PollOutcome } from '../../src/repositories/device-requests.js';

/** What the poll's statement returns for a pending request of an enabled app, polled on time. */
const ON_TIME: Pick<PollOutcome, 'client_disabled' | 'status' | 'denied_reason' | 'expired' | 'throttled' | 'interval_seconds'> = {
  client_disabled: false,
  status: 'pending',
  denied_reason: null,
  expired: false,
  throttled: false,
  interval_seconds: 5,
};

describe("the device-code poll's statement, read into an answer (RFC 8628 §3.5)", () => {
  it.each([
    ['pending, on time', {}, 'authorization_pending', true],
    ['pending, too soon', { throttled: true, interval_seconds: 10 }, 'slow_down', false],
    ['approved, too soon', { status: 'approved', throttled: true }, 'slow_down', false],
    ['approved, on time', { status: 'approved' }, 'issue tokens', true],
    ['expired while pending', { expired: true }, 'expired_token', true],
    ['expired and too soon: expiry first', { expired: true, throttled: true }, 'expired_token', true],
    ['expired after approval', { status: 'approved', expired: true }, 'expired_token', true],
    ['denied by the user', { status: 'denied', denied_reason: 'user_denied' }, 'access_denied', true],
    ['denied, even past expiry and too soon', { status: 'denied', denied_reason: 'policy', expired: true, throttled: true }, 'access_denied', true],
    ['redeemed', { status: 'redeemed' }, 'invalid_grant', true],
    ['redeemed, polled too soon', { status: 'redeemed', throttled: true }, 'invalid_grant', true],
    ['the app disabled, whatever the request', { client_disabled: true, status: 'approved' }, 'invalid_client', false],
  ] as const)('%s -> %s (proof spent: %s)', (_case, found, answer, spent) => {
    const verdict = judgePoll({ ...ON_TIME, ...found });
    expect(verdict.refusal?.error ?? 'issue tokens').toBe(answer);
    expect(verdict.spendProof).toBe(spent);
  });

  it('slow_down names the grown interval the device must now wait', () => {
    expect(judgePoll({ ...ON_TIME, throttled: true, interval_seconds: 15 }).refusal?.description).toBe(
      'polling too fast; wait at least 15 seconds between polls',
    );
  });

  it.each(Object.entries(DENIAL_TEXT))('a request denied for %s says so', (reason, text) => {
    const refusal = judgePoll({ ...ON_TIME, status: 'denied', denied_reason: reason as keyof typeof DENIAL_TEXT }).refusal;
    expect(refusal?.toBody()).toEqual({ error: 'access_denied', error_description: text });
  });

  it('a denial without a recorded reason is the user’s', () => {
    expect(judgePoll({ ...ON_TIME, status: 'denied', denied_reason: null }).refusal?.description).toBe(DENIAL_TEXT.user_denied);
  });

  it('authorization_pending is answered with a 400, as every poll error (RFC 8628 §3.5)', () => {
    expect(judgePoll(ON_TIME).refusal?.status).toBe(400);
  });
});
