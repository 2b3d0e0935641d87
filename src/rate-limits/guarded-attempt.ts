import type { FailureLimitName, RateLimiter, Reservation, Verdict } from './limiter.js';

/**
 * One attempt at something guessable (a user code, a decision on a shown request, a password),
 * limited by failure limits: the protocol every guessable surface shares, written once.
 */
export interface Attempt<T> {
  /** The failure limits the attempt counts against, each with its subject (a user, an address, an account). */
  readonly limits: ReadonlyArray<readonly [FailureLimitName, string]>;
  /** Whether the attempt may be evaluated; by default, only while it is past none of its limits. */
  readonly verdict?: (reservation: Reservation) => Verdict;
  /** Evaluates the attempt; called only when the verdict let it through. */
  readonly evaluate: (reservation: Reservation) => Promise<T>;
  /**
   * Which of its counts an outcome keeps: a failure (a wrong code, a wrong password) keeps them
   * all, a success none; an outcome may keep some ('busy' keeps only the address's).
   */
  readonly kept: (outcome: T) => 'all' | 'none' | readonly FailureLimitName[];
}

export type GuardedOutcome<T> = { limited: true; retryAfterSeconds: number } | { limited: false; outcome: T };

/**
 * Reserve, verdict, evaluate, refund. The attempt is counted before it is evaluated (one atomic
 * increment per limit, see Reservation), so of many sent at once only each limit's worth are
 * evaluated; an attempt refused by its limits, or that could not be evaluated (the database
 * failed, say), was no guess and gives its counts back; an evaluated one keeps what `kept` says.
 */
export async function guardedAttempt<T>(limiter: RateLimiter, now: Date, attempt: Attempt<T>): Promise<GuardedOutcome<T>> {
  const reservation = await limiter.reserve(attempt.limits, now);
  const verdict = attempt.verdict ? attempt.verdict(reservation) : reservation.verdict();
  if (verdict.limited) {
    await reservation.refund();
    return verdict;
  }
  let outcome: T;
  try {
    outcome = await attempt.evaluate(reservation);
  } catch (error) {
    // Not evaluated (the database failed, say): the attempt was no guess.
    void reservation.refund();
    throw error;
  }
  const kept = attempt.kept(outcome);
  // A success waits for its counts to be back, so that the person's next attempt finds them so.
  if (kept === 'none') await reservation.refund();
  // Some kept (a refusal for capacity): answered at once, the counts given back behind it.
  else if (kept !== 'all') void reservation.refund(kept);
  return { limited: false, outcome };
}
