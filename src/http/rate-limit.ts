import type { Translator } from '../i18n/catalogues.js';
import type { FastifyRequest } from 'fastify';
import type { Deps } from '../deps.js';
import { addressKey, addressPrefixes } from '../lib/client-address.js';
import { tooManyRequests } from '../oauth/errors.js';
import type { RequestLimitName, SharedLimitName, Verdict } from '../rate-limits/limiter.js';

/** Who per-address limits count: the client's address, IPv6 grouped by its configured prefix. */
export function limitedAddress(deps: Deps, request: FastifyRequest): string {
  return addressKey(request.ip, deps.config.ipv6Prefix);
}

/**
 * Counts one request against a limit; over it is a 429 OAuth error (thrown). Returns a promise
 * only when the limit is counted in the store: the in-memory ones, on every poll and refresh,
 * cost the caller no await.
 */
export function consumeOAuthLimit(deps: Deps, name: RequestLimitName, subject: string): void | Promise<void> {
  return refuseIfLimited(deps.rateLimiter.consume(name, subject, deps.clock.now()));
}

/**
 * Counts one request against an app's budget, which its devices share. Call it last before the
 * work, once everything that would refuse the request anyway has been checked: a request refused
 * for what it is never counts. Past the budget only the networks that sent more than their share
 * are refused (see RateLimiter.consumeShared); in memory on the hot paths, like consumeOAuthLimit.
 */
export function consumeAppBudget(deps: Deps, name: SharedLimitName, clientId: string, request: FastifyRequest): void | Promise<void> {
  return refuseIfLimited(deps.rateLimiter.consumeShared(name, clientId, addressPrefixes(request.ip), deps.clock.now()));
}

/** A 429 OAuth error (thrown) for a limited verdict, now or when the store's answer comes. */
function refuseIfLimited(verdict: Verdict | Promise<Verdict>): void | Promise<void> {
  if (verdict instanceof Promise) return verdict.then(refuseIfLimited);
  if (verdict.limited) {
    throw tooManyRequests(`too many requests; retry after ${verdict.retryAfterSeconds} seconds`, verdict.retryAfterSeconds);
  }
}

/** How long to wait, in the reader's language: seconds below a minute and a half, else minutes. */
export function waitText(i18n: Translator, seconds: number): string {
  if (seconds < 90) return i18n.t('time.wait_seconds', { seconds });
  return i18n.t('time.wait_minutes', { minutes: Math.ceil(seconds / 60) });
}
