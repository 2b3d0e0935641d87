import { sql } from 'kysely';
import type { PollOutcome, PollRules } from '../../repositories/device-requests.js';
import { keyNotProven } from '../dpop.js';
import { DISABLED_APP } from '../client-auth.js';
import { accessDenied, authorizationPending, expiredToken, invalidClient, invalidGrant, type OAuthError, slowDown } from '../errors.js';
import { keyProvenSql } from './key-binding.js';

/**
 * The device-code grant's rules (RFC 8628 §3.4, §3.5), in one place: what its poll's statement
 * applies (repositories/device-requests.ts, devicePollRecorder) and how the grant reads what the
 * statement found.
 */

/**
 * How early a poll may come: the larger of this fraction of the interval and this many seconds.
 * Both times are when the server received the poll, and a device that waits exactly `interval`
 * between sends must not lose to a few milliseconds of network or scheduling jitter: at 2 s, a
 * poll 1.5 s after the previous one is on time and one 0.5 s after it is slow_down.
 */
export const POLL_TOLERANCE = { fraction: 0.1, minimumSeconds: 0.5 } as const;

/** RFC 8628 §3.5: slow_down, "the interval MUST be increased by 5 seconds for this and all subsequent requests". */
export const SLOW_DOWN_STEP_SECONDS = 5;

/**
 * What the poll's one statement applies: only a pending request slows down, and a poll is too soon
 * when it comes before the interval less the tolerance has passed since the previous poll (or
 * the issue); a bound request is touched only by a poll that proved its key.
 */
export const pollRules: PollRules = {
  // interval − max(fraction × interval, minimum) = least((1 − fraction) × interval, interval − minimum)
  tooSoon: ({ status, previousPollAt, intervalSeconds, now }) => sql<boolean>`${status} = 'pending'
  AND ${now} < ${previousPollAt} + make_interval(secs => least(
    ${intervalSeconds} * ${sql.lit(1 - POLL_TOLERANCE.fraction)}, ${intervalSeconds} - ${sql.lit(POLL_TOLERANCE.minimumSeconds)})::double precision)`,
  slowDownStepSeconds: SLOW_DOWN_STEP_SECONDS,
  keyProven: keyProvenSql,
};

export const DENIAL_TEXT = {
  user_denied: 'the user denied the request',
  wrong_phrase: 'the user picked a confirmation phrase that was not shown on this device; the request was cancelled',
  user_banned: 'the user may not sign in',
  policy: "the service's policy refused a request from where this one came from",
  redeemer_mismatch: "the service's policy refused to deliver tokens to where this poll came from; the request was cancelled",
} as const;

/** The answer to a poll of a request that is bound to a key the poll did not prove: the same whatever its state. */
export const POLL_WITHOUT_KEY = Object.freeze(
  keyNotProven('token_endpoint', 'this device_code is bound to a DPoP key; every poll must carry a proof of that key'),
);

export const ALREADY_USED = 'this device_code has already been used';

/** What a poll hears, once its statement found the app's request. */
export interface PollVerdict {
  /**
   * Whether the poll's DPoP proof is recorded as used (issue 28 §2): not for a slow_down, which
   * tells nothing and gives nothing: of one proof sent several times at once the database lets one
   * poll through unthrottled, so that poll alone spends it, and it is the one that may redeem.
   */
  spendProof: boolean;
  /** The answer, or null: the request is approved and this poll may redeem it. */
  refusal: OAuthError | null;
}

/** Most polls' verdict, the same every time: made once rather than on each of them. */
const STILL_PENDING: PollVerdict = Object.freeze({ spendProof: true, refusal: Object.freeze(authorizationPending('the user has not finished yet')) });
const APP_DISABLED: PollVerdict = Object.freeze({ spendProof: false, refusal: Object.freeze(invalidClient(DISABLED_APP)) });
const MAY_REDEEM: PollVerdict = Object.freeze({ spendProof: true, refusal: null });
const REDEEMED: PollVerdict = Object.freeze({ spendProof: true, refusal: Object.freeze(invalidGrant(ALREADY_USED)) });
const EXPIRED: PollVerdict = Object.freeze({ spendProof: true, refusal: Object.freeze(expiredToken('the device_code has expired; request a new code')) });

/**
 * RFC 8628 §3.5, in this order: a disabled app (before the proof is spent), then used, denied,
 * expired, too soon, pending; else approved, to be redeemed.
 */
export function judgePoll(poll: Pick<PollOutcome, 'client_disabled' | 'status' | 'denied_reason' | 'expired' | 'throttled' | 'interval_seconds'>): PollVerdict {
  if (poll.client_disabled) return APP_DISABLED;
  if (poll.status === 'redeemed') return REDEEMED;
  if (poll.status === 'denied') return { spendProof: true, refusal: accessDenied(DENIAL_TEXT[poll.denied_reason ?? 'user_denied']) };
  if (poll.expired) return EXPIRED;
  if (poll.throttled) {
    return { spendProof: false, refusal: slowDown(`polling too fast; wait at least ${poll.interval_seconds} seconds between polls`) };
  }
  if (poll.status === 'pending') return STILL_PENDING;
  return MAY_REDEEM;
}
