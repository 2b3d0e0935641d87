import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import type { Database } from '../../db/connect.js';
import type { Clock } from '../../lib/clock.js';
import type { Metrics } from '../../lib/metrics.js';
import { findPlatformIcon, giveIconToRequest, storePlatformIcon } from '../../repositories/platform-icons.js';
import { fetchIcon, type IconFetchOptions } from './icon-fetch.js';

/** Where the pages load a stored icon from: our own origin, never the device's host. */
export function iconPath(sha256: Uint8Array): string {
  return `/icons/${Buffer.from(sha256).toString('hex')}`;
}

const ICON_NAME = /^[0-9a-f]{64}$/;

/** The stored icon a path names (`/icons/<lowercase hex SHA-256>`), if any. */
export async function findStoredIcon(db: Database, name: string): Promise<{ contentType: string; bytes: Buffer } | undefined> {
  if (!ICON_NAME.test(name)) return undefined;
  const row = await findPlatformIcon(db, Buffer.from(name, 'hex'));
  return row && { contentType: row.content_type, bytes: Buffer.from(row.bytes) };
}

export interface PlatformIconOptions {
  /** Fetches running at once; a request that finds them all taken gets no icon. */
  concurrency: number;
  /** Bytes of stored icons per app and in total; past either a new icon is not stored (the request gets none). */
  storage: { perApp: number; total: number };
  fetch: Omit<IconFetchOptions, 'signal'>;
}

/** An icon URL fetched a moment ago is not fetched again: a TV app's devices all send the same one. */
const REMEMBER_STORED_MS = 3600_000;
/** Nor is one that just failed, so a burst of requests naming a dead host costs one fetch. */
const REMEMBER_FAILED_MS = 60_000;
/** URLs remembered at most; the oldest is forgotten first. */
const REMEMBERED_URLS = 1024;

interface Remembered {
  /** The stored icon, or null when the fetch failed. */
  sha256: Buffer | null;
  until: number;
}

/**
 * Gives device requests their platform icons, fetched by the server in the background: code
 * issuance never waits for a device's host. A fetch is bounded (icon-fetch.ts), so is the number
 * running at once, and every URL's outcome is remembered for a while.
 */
export class PlatformIcons {
  readonly #fetching = new Map<string, Promise<Buffer | null>>();
  readonly #remembered = new Map<string, Remembered>();
  readonly #tasks = new Set<Promise<void>>();
  readonly #shutdown = new AbortController();

  constructor(
    private readonly db: Database,
    private readonly clock: Clock,
    private readonly log: Logger,
    private readonly metrics: Metrics,
    private readonly options: PlatformIconOptions,
  ) {}

  /** Starts giving the request its icon and returns at once; the approval page shows it once stored. */
  giveLater(requestId: string, clientId: string, url: string): void {
    if (this.#shutdown.signal.aborted) return;
    const task = this.#give(requestId, clientId, url)
      .catch((error: unknown) => this.log.warn({ err: error }, 'platform icon not stored'))
      .finally(() => this.#tasks.delete(task));
    this.#tasks.add(task);
  }

  /** Resolves once every icon started so far is stored or given up: for tests and shutdown. */
  async settled(): Promise<void> {
    while (this.#tasks.size > 0) await Promise.allSettled([...this.#tasks]);
  }

  /** Ends fetches in flight and waits for their requests to be updated or left alone. */
  async close(): Promise<void> {
    this.#shutdown.abort();
    await this.settled();
  }

  async #give(requestId: string, clientId: string, url: string): Promise<void> {
    // Twice at most: a remembered icon may have been purged since, then it is fetched anew.
    for (let attempt = 0; attempt < 2; attempt++) {
      const sha256 = await this.#storedIconOf(clientId, url);
      if (!sha256) return;
      if (await giveIconToRequest(this.db, requestId, sha256, this.clock.now())) return;
      this.#remembered.delete(url);
    }
  }

  /** The stored icon of a URL: remembered, being fetched by another request, or fetched now. */
  #storedIconOf(clientId: string, url: string): Promise<Buffer | null> {
    const remembered = this.#remembered.get(url);
    if (remembered && remembered.until > this.clock.now().getTime()) {
      if (remembered.sha256) this.metrics.platformIconFetches.inc({ outcome: 'reused' });
      return Promise.resolve(remembered.sha256);
    }
    const running = this.#fetching.get(url);
    if (running) return running;
    if (this.#fetching.size >= this.options.concurrency) {
      this.metrics.platformIconFetches.inc({ outcome: 'dropped_busy' });
      return Promise.resolve(null);
    }
    const fetching = this.#fetchAndStore(clientId, url).finally(() => this.#fetching.delete(url));
    this.#fetching.set(url, fetching);
    return fetching;
  }

  async #fetchAndStore(clientId: string, url: string): Promise<Buffer | null> {
    const fetched = await fetchIcon(url, { ...this.options.fetch, signal: this.#shutdown.signal });
    if (!fetched.ok) {
      this.metrics.platformIconFetches.inc({ outcome: fetched.refusal });
      // The host only, cut short: the rest of the URL is the device's to choose.
      this.log.info({ icon_host: new URL(url).host.slice(0, 255), reason: fetched.refusal }, 'platform icon not fetched');
      if (fetched.refusal !== 'shutting_down') this.#remember(url, null, REMEMBER_FAILED_MS);
      return null;
    }
    const sha256 = createHash('sha256').update(fetched.bytes).digest();
    const icon = { sha256, contentType: fetched.contentType, bytes: fetched.bytes };
    if (!(await storePlatformIcon(this.db, icon, clientId, this.options.storage, this.clock.now()))) {
      // The app's (or everyone's) icon storage is full: no icon, and the URL is not fetched again for a while.
      this.metrics.platformIconFetches.inc({ outcome: 'dropped_storage_full' });
      this.#remember(url, null, REMEMBER_FAILED_MS);
      return null;
    }
    this.metrics.platformIconFetches.inc({ outcome: 'stored' });
    this.#remember(url, sha256, REMEMBER_STORED_MS);
    return sha256;
  }

  #remember(url: string, sha256: Buffer | null, forMs: number): void {
    this.#remembered.delete(url);
    if (this.#remembered.size >= REMEMBERED_URLS) {
      const oldest = this.#remembered.keys().next().value;
      if (oldest !== undefined) this.#remembered.delete(oldest);
    }
    this.#remembered.set(url, { sha256, until: this.clock.now().getTime() + forMs });
  }
}
