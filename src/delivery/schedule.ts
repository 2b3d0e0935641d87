/**
 * When a message that failed is tried again, and when it is given up: exponential backoff from
 * EVENTS_RETRY_BASE_SECONDS, doubling up to an hour between attempts, for 72 hours of schedule.
 * Time a target spends paused does not count: the schedule is measured in attempts, not from the
 * message's creation, so a backlog kept through a pause is tried again in full when it resumes.
 */

const RETRY_WINDOW_SECONDS = 72 * 3600;
const MAX_RETRY_DELAY_SECONDS = 3600;

/** Seconds to wait after the `failures`-th failure in a row (1, 2, ...). */
export function retryDelaySeconds(baseSeconds: number, failures: number): number {
  const exponent = Math.min(Math.max(failures - 1, 0), 30);
  return Math.min(baseSeconds * 2 ** exponent, MAX_RETRY_DELAY_SECONDS);
}

/** Attempts a message gets in all: the first, then retries until their delays add up to 72 hours. */
export function maxAttempts(baseSeconds: number): number {
  let waited = 0;
  let attempts = 1;
  while (waited < RETRY_WINDOW_SECONDS) {
    waited += retryDelaySeconds(baseSeconds, attempts);
    attempts += 1;
  }
  return attempts;
}
