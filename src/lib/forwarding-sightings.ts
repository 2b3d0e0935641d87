/**
 * The latest request that came with X-Forwarded-For from a peer TRUST_PROXY does not name (issue
 * 27 §2), shared by the public app that sees it and the admin API that reports it (/readyz, the
 * self-assessment of issue 31 §2). One per process, created with the other dependencies.
 */
export class ForwardingSightings {
  #latest: { peer: string; at: number } | null = null;

  record(peer: string, at: number): void {
    this.#latest = { peer, at };
  }

  /** The latest sighting, if it is at most `withinMs` old at `now`. */
  latest(now: number, withinMs: number): { peer: string; at: number } | null {
    return this.#latest !== null && now - this.#latest.at <= withinMs ? this.#latest : null;
  }
}
