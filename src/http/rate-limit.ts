import type { Deps } from '../deps.js';
import { tooManyRequests } from '../oauth/errors.js';
import { RateLimiter, type LimitName, type Verdict } from '../rate-limits/limiter.js';

/** Counts one attempt against each named limit; over any of them is a 429 OAuth error. */
export async function consumeOAuthLimits(deps: Deps, limits: ReadonlyArray<readonly [LimitName, string]>): Promise<void> {
  const now = deps.clock.now();
  const verdicts = await Promise.all(limits.map(([name, subject]) => deps.rateLimiter.consume(name, subject, now)));
  const verdict = RateLimiter.first(verdicts);
  if (verdict.limited) {
    throw tooManyRequests(`too many requests; retry after ${verdict.retryAfterSeconds} seconds`, verdict.retryAfterSeconds);
  }
}

/** Whether earlier failures reached any of the named limits (counts nothing). */
export async function failureLimitReached(deps: Deps, limits: ReadonlyArray<readonly [LimitName, string]>): Promise<Verdict> {
  const now = deps.clock.now();
  return RateLimiter.first(await Promise.all(limits.map(([name, subject]) => deps.rateLimiter.check(name, subject, now))));
}

export async function recordFailures(deps: Deps, limits: ReadonlyArray<readonly [LimitName, string]>): Promise<void> {
  const now = deps.clock.now();
  await Promise.all(limits.map(([name, subject]) => deps.rateLimiter.recordFailure(name, subject, now)));
}

export function waitText(seconds: number): string {
  if (seconds < 90) return `${seconds} seconds`;
  return `${Math.ceil(seconds / 60)} minutes`;
}
