import type { Logger } from 'pino';
import type { ChannelSubscription, Database, DatabaseHandle } from '../db/connect.js';
import { describeUnavailable } from '../db/unavailable.js';
import type { Clock } from '../lib/clock.js';
import { findClient } from '../repositories/clients.js';
import { CLIENT_ID_SYNTAX, type ClientLookup, type RegisteredClient } from '../oauth/client-auth.js';

/** The channel on which a trigger announces, on commit, the id of every client row updated or deleted. */
export const CLIENT_CHANGES_CHANNEL = 'device_auth_client_changes';

/**
 * What a client is (id, name, kind, type, secret hash, scopes, whether it may introspect), kept in
 * memory so that the hot token paths spend no round trip on it. Every change to a client row, by
 * any instance, the CLI or psql, is announced on commit (a trigger's pg_notify on
 * CLIENT_CHANGES_CHANNEL) and evicts that client here, so each instance reads the new row at its
 * next request. Announcements made while not listening are lost, so the cache is trusted only
 * while listening, and emptied whenever listening starts or stops.
 *
 * Whether the app is disabled is NOT taken from the cache: hot paths check it in the same SQL
 * statement that does their work, the others read it fresh (authenticateClient).
 */
export class ClientDirectory implements ClientLookup {
  readonly #cache = new Map<string, RegisteredClient>();
  #listening = false;
  /**
   * Counts evictions. A read that began before an announcement may return the row as it was
   * before the change; it is kept only if no eviction happened while it ran.
   */
  #evictions = 0;
  #announcementsHeard = 0;
  #subscription: ChannelSubscription | null = null;

  constructor(
    private readonly db: Database,
    /** Ends a rotated secret's grace period. */
    readonly clock: Clock,
    private readonly log: Logger,
    private readonly capacity = 10_000,
  ) {}

  /** Listens to client changes until close(); resolves once the first attempt ended, listening or not. */
  async follow(database: DatabaseHandle): Promise<void> {
    let lostOnce = false;
    this.#subscription = await database.listen(CLIENT_CHANGES_CHANNEL, {
      onNotification: (clientId) => {
        this.#announcementsHeard++;
        this.#forget(clientId);
      },
      onListening: () => {
        this.#forgetAll();
        this.#listening = true;
        if (lostOnce) this.log.info('listening to client changes again; clients are cached again');
      },
      onListeningLost: (reason) => {
        lostOnce = true;
        this.#listening = false;
        this.#forgetAll();
        // Not a warning: every answer stays right, each request only reads its client again.
        this.log.info(describeUnavailable(reason), 'not listening to client changes; clients are read from the database until it listens again');
      },
    });
  }

  /** Whether announcements are heard, so that the cache is in use. */
  get listening(): boolean {
    return this.#listening;
  }

  /**
   * How many client changes were announced to this instance. An announcement arrives a moment
   * after its commit (a millisecond on one host): a request begun before then may still be
   * answered from the old row.
   */
  get announcementsHeard(): number {
    return this.#announcementsHeard;
  }

  async close(): Promise<void> {
    this.#listening = false;
    this.#forgetAll();
    await this.#subscription?.close();
    this.#subscription = null;
  }

  async find(clientId: string): Promise<(RegisteredClient & { disabled: boolean }) | null> {
    if (!CLIENT_ID_SYNTAX.test(clientId)) return null;
    const evictionsBefore = this.#evictions;
    const row = await findClient(this.db, clientId);
    if (!row) return null;
    const client = registeredClient(row);
    if (this.#listening && this.#evictions === evictionsBefore) this.#remember(client);
    return { ...client, disabled: row.disabled_at !== null };
  }

  async findStatic(clientId: string): Promise<RegisteredClient | null> {
    return (this.#listening ? this.#cache.get(clientId) : undefined) ?? (await this.find(clientId));
  }

  #remember(client: RegisteredClient): void {
    if (this.#cache.size >= this.capacity) this.#cache.delete(this.#cache.keys().next().value as string);
    this.#cache.set(client.clientId, client);
  }

  #forget(clientId: string): void {
    this.#evictions++;
    this.#cache.delete(clientId);
  }

  #forgetAll(): void {
    this.#evictions++;
    this.#cache.clear();
  }
}

function registeredClient(row: NonNullable<Awaited<ReturnType<typeof findClient>>>): RegisteredClient {
  return {
    clientId: row.client_id,
    name: row.name,
    kind: row.kind,
    type: row.type,
    allowedScopes: row.allowed_scopes,
    mayIntrospect: row.introspection_allowed,
    grantTypes: row.grant_types,
    redirectUris: row.redirect_uris,
    postLogoutRedirectUris: row.post_logout_redirect_uris,
    requireDpop: row.require_dpop,
    confirmationPhrase: row.confirmation_phrase,
    secretHash: row.secret_hash ? Buffer.from(row.secret_hash) : null,
    previousSecretHash: row.previous_secret_hash ? Buffer.from(row.previous_secret_hash) : null,
    previousSecretUntil: row.previous_secret_expires_at?.getTime() ?? 0,
  };
}
