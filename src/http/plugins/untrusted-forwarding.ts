import type { FastifyInstance } from 'fastify';
import type { Deps } from '../../deps.js';

/** One warning per this many milliseconds at most; /readyz reports the problem while it was seen this recently. */
const UNTRUSTED_FORWARDING_INTERVAL_MS = 10 * 60 * 1000;

/** What /readyz says of forwarded requests from a peer TRUST_PROXY does not name (issue 27 §2). */
export interface UntrustedForwardingDetail {
  peer: string;
  last_seen: string;
  message: string;
}

export interface ForwardingWatch {
  /** The latest sighting within the interval, or null. */
  detail(): UntrustedForwardingDetail | null;
}

const MESSAGE =
  'requests arrive with X-Forwarded-For from a peer that TRUST_PROXY does not name: every client then has that ' +
  "peer's address, so rate limits, audit and the approval page's proximity check judge the proxy, not the client. " +
  "Set TRUST_PROXY to the proxy's address (or network)";

/**
 * Behind a reverse proxy without TRUST_PROXY, every party has the proxy's address (issue 27 §2):
 * proximity then says "location unknown" for everyone, which is safe but useless. The operator
 * hears of it: one warning per interval in the log, and a detail in /readyz (status stays 200).
 * A forwarded request from an untrusted peer is one whose address fastify did not take from the
 * header: request.ip is still the socket's peer.
 */
export function registerUntrustedForwardingWatch(app: FastifyInstance, deps: Pick<Deps, 'clock' | 'log' | 'forwardingSightings'>): ForwardingWatch {
  let lastWarned = Number.NEGATIVE_INFINITY;
  // Synchronous: it runs on every request, and an async hook costs a promise each time.
  app.addHook('onRequest', (request, _reply, done) => {
    if (request.headers['x-forwarded-for'] === undefined) return done();
    const peer = request.socket.remoteAddress;
    if (peer === undefined || request.ip !== peer) return done();
    const at = deps.clock.now().getTime();
    deps.forwardingSightings.record(peer, at);
    if (at - lastWarned >= UNTRUSTED_FORWARDING_INTERVAL_MS) {
      lastWarned = at;
      deps.log.warn({ peer }, MESSAGE);
    }
    done();
  });
  return { detail: () => untrustedForwardingDetail(deps) };
}

/** The latest forwarded request from an untrusted peer within the interval, or null. */
export function untrustedForwardingDetail(deps: Pick<Deps, 'clock' | 'forwardingSightings'>): UntrustedForwardingDetail | null {
  const seen = deps.forwardingSightings.latest(deps.clock.now().getTime(), UNTRUSTED_FORWARDING_INTERVAL_MS);
  return seen === null ? null : { peer: seen.peer, last_seen: new Date(seen.at).toISOString(), message: MESSAGE };
}
