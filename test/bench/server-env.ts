import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { ROOT } from './processes.js';

/**
 * How the benchmarks run the server: what `npm run bench` and `npm run bench:ab` share, so that
 * both measure the same process.
 */

/**
 * The server runs with the image's NODE_OPTIONS (its heap cap), read from the Dockerfile so that
 * the benchmark measures the process as it is deployed.
 */
export const IMAGE_NODE_OPTIONS = (() => {
  const dockerfile = readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8');
  const options = /^\s*NODE_OPTIONS="([^"]*)"/m.exec(dockerfile)?.[1];
  if (options === undefined) throw new Error('the Dockerfile sets no NODE_OPTIONS="..." for the benchmark to run the server with');
  return options;
})();

/** Rate limits the single load-generator address would hit; ≥ 1000 per window, so counted in memory. */
export const RAISED_LIMITS = {
  RATE_LIMIT_DEVICE_CODE_PER_IP: '100000000/60',
  RATE_LIMIT_DEVICE_CODE_PER_CLIENT: '100000000/60',
  RATE_LIMIT_TOKEN_PER_CLIENT: '100000000/60',
  RATE_LIMIT_TOKEN_PER_IP: '100000000/60',
  RATE_LIMIT_USERINFO_PER_IP: '100000000/60',
  RATE_LIMIT_INTROSPECT_PER_CLIENT: '100000000/60',
  RATE_LIMIT_INTROSPECT_PER_IP: '100000000/60',
  RATE_LIMIT_REVOKE_PER_CLIENT: '100000000/60',
  RATE_LIMIT_REVOKE_PER_IP: '100000000/60',
};

/** A request unanswered for this long counts as failed (and its connection is replaced). */
export const REQUEST_TIMEOUT_MS = 30_000;

/** One key-encryption key per run: every server of the run shares its database's keys, as replicas do. */
const KEY_ENCRYPTION_KEY = randomBytes(32).toString('base64');

export const childEnv = (extra: Record<string, string> = {}) => ({
  PATH: process.env.PATH ?? '/usr/bin:/bin',
  NODE_ENV: 'production',
  KEY_ENCRYPTION_KEY,
  ...extra,
});

/** The server's settings under load (besides where it listens and its database). */
export const SERVER_SETTINGS = {
  LOG_LEVEL: 'warn',
  DEVICE_POLL_INTERVAL: '1',
  PURGE_INTERVAL: '0',
  NODE_OPTIONS: IMAGE_NODE_OPTIONS,
  ...RAISED_LIMITS,
};
