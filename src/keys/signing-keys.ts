import { calculateJwkThumbprint, exportJWK, generateKeyPair, importJWK, type CryptoKey, type JWK } from 'jose';
import type { Transaction } from 'kysely';
import type { Logger } from 'pino';
import type { ChannelSubscription, Database, DatabaseHandle } from '../db/connect.js';
import type { DB } from '../db/schema.js';
import { describeUnavailable, isDatabaseUnavailable } from '../db/unavailable.js';
import { actorColumn, recordEvents, type Actor } from '../events/event-log.js';
import type { Clock } from '../lib/clock.js';
import type { Sealer } from './sealing.js';
import {
  deleteSpentSigningKeys,
  insertSigningKey,
  listAllSigningKeys,
  listLiveSigningKeys,
  listUnrevokedSigningKeysLocked,
  lockSigningKeys,
  retireSigningKey,
  revokeSigningKey,
  scheduleSigningKey,
  type StoredSigningKey,
} from '../repositories/signing-keys.js';
import { signingKeyIdentity } from './key-encryption.js';

export const ID_TOKEN_ALG = 'RS256';

/** The channel on which a trigger announces, on commit, the kid of every signing key inserted, changed or deleted. */
const SIGNING_KEYS_CHANNEL = 'device_auth_signing_keys';

/**
 * Every instance reloads its keys and runs the maintenance at least this often, whether or not it
 * heard an announcement: a key made while it was not listening reaches it within this time.
 */
const KEY_RELOAD_SECONDS = 60;

export interface KeyPolicy {
  /** SIGNING_KEY_ROTATION_DAYS: how long a key signs before the next one takes over. */
  rotationSeconds: number;
  /** JWKS_CACHE_SECONDS: how long a verifier may keep the JWKS it fetched. */
  jwksCacheSeconds: number;
  /** ID_TOKEN_TTL: the longest a token signed by a key lives, so how long a retired key stays published. */
  idTokenTtlSeconds: number;
}

/**
 * How long a key is published before it signs. A verifier that fetched the JWKS just before the
 * key appeared keeps that copy for the cache lifetime; an instance that missed the announcement
 * publishes the key only at its next reload. Both must have passed before a token names the key.
 */
export const announcementSeconds = (policy: KeyPolicy) => policy.jwksCacheSeconds + KEY_RELOAD_SECONDS;

export type KeyState = 'next' | 'active' | 'retired' | 'revoked';

type KeyTimes = Pick<StoredSigningKey, 'activates_at' | 'retired_at' | 'revoked_at'>;

/** The state follows from the timestamps and the clock alone, so every instance agrees. */
function keyState(key: KeyTimes, now: Date): KeyState {
  const t = now.getTime();
  if (key.revoked_at !== null) return 'revoked';
  if (key.retired_at !== null && key.retired_at.getTime() <= t) return 'retired';
  if (key.activates_at !== null && key.activates_at.getTime() <= t) return 'active';
  return 'next';
}

/** Published in the JWKS: not revoked, and not retired longer ago than a token it signed can live. */
function isPublished(key: KeyTimes, now: Date, policy: Pick<KeyPolicy, 'idTokenTtlSeconds'>): boolean {
  if (key.revoked_at !== null) return false;
  return key.retired_at === null || key.retired_at.getTime() > now.getTime() - policy.idTokenTtlSeconds * 1000;
}

/** The key that signs at `now`: active, and of the active ones the latest to activate. */
function signingAmong<T extends KeyTimes>(keys: readonly T[], now: Date): T | null {
  let best: T | null = null;
  for (const key of keys) {
    if (keyState(key, now) !== 'active') continue;
    if (best === null || key.activates_at!.getTime() > best.activates_at!.getTime()) best = key;
  }
  return best;
}

async function newKey(sealer: Sealer) {
  const { publicKey, privateKey } = await generateKeyPair(ID_TOKEN_ALG, { modulusLength: 2048, extractable: true });
  const publicJwk = await exportJWK(publicKey);
  // kid is the RFC 7638 thumbprint, so it names the key itself.
  const kid = await calculateJwkThumbprint(publicJwk, 'sha256');
  const privateKeySealed = sealer.seal(Buffer.from(JSON.stringify(await exportJWK(privateKey))), signingKeyIdentity(kid));
  return { kid, alg: ID_TOKEN_ALG, publicJwk, privateKeySealed };
}

export interface KeySchedule {
  /** The key signing now. */
  active: string;
  /** The key that signs next, and from when (null: not scheduled yet). */
  next: { kid: string; activates_at: Date | null } | null;
  created: string[];
}

/**
 * Moves the ring on, under the table lock so that one instance at a time does it:
 * - drops keys no token can need any more (retired or revoked longer than ID_TOKEN_TTL ago);
 * - with no key signing (a fresh database, or the signing key revoked), the next key signs at
 *   once, or a new one if there is none: there was no JWKS a verifier could hold without it;
 * - when the signing key is SIGNING_KEY_ROTATION_DAYS old (or `rotateNow`), schedules the
 *   rotation: the next key activates, and the signing key retires, at the same instant, no
 *   sooner than announcementSeconds after the next key was made;
 * - keeps one next key published ahead, made once the previous next key has started signing.
 */
/** What asked for a maintenance: a rotation now, and the operator who asked (none: the server's own schedule). */
interface MaintenanceRequest {
  rotateNow?: boolean;
  actor?: Actor | null;
}

async function maintainLocked(trx: Transaction<DB>, sealer: Sealer, now: Date, policy: KeyPolicy, request: MaintenanceRequest = {}): Promise<KeySchedule> {
  const { rotateNow = false, actor = null } = request;
  const created: string[] = [];
  const add = async (activatesAt: Date | null) => {
    const key = await newKey(sealer);
    await insertSigningKey(trx, { ...key, createdAt: now, activatesAt });
    created.push(key.kid);
  };
  await deleteSpentSigningKeys(trx, new Date(now.getTime() - policy.idTokenTtlSeconds * 1000));
  let keys = await listUnrevokedSigningKeysLocked(trx);
  const pending = () => keys.filter((k) => keyState(k, now) === 'next');

  let signing = signingAmong(keys, now);
  if (signing === null) {
    const successor = pending()[0];
    if (successor) await scheduleSigningKey(trx, successor.kid, now);
    else await add(now);
    keys = await listUnrevokedSigningKeysLocked(trx);
    signing = signingAmong(keys, now)!;
  }

  const scheduled = pending().some((k) => k.activates_at !== null);
  const due = signing.activates_at!.getTime() <= now.getTime() - policy.rotationSeconds * 1000;
  if (!scheduled && (rotateNow || due)) {
    if (pending().length === 0) {
      await add(null);
      keys = await listUnrevokedSigningKeysLocked(trx);
    }
    const next = pending()[0]!;
    const switchAt = new Date(Math.max(now.getTime(), next.created_at.getTime() + announcementSeconds(policy) * 1000));
    await scheduleSigningKey(trx, next.kid, switchAt);
    await retireSigningKey(trx, signing.kid, switchAt);
    // Recorded when the rotation is decided, with the instant it takes effect: from then on it happens by the clock alone.
    await recordEvents(trx, [
      {
        type: 'signing_key.rotated',
        created_at: now,
        actor: actorColumn(actor ?? { kind: 'server' }),
        reason: rotateNow ? 'operator' : 'age',
        data: JSON.stringify({ from_kid: signing.kid, to_kid: next.kid, at: switchAt.toISOString() }),
      },
    ]);
    keys = await listUnrevokedSigningKeysLocked(trx);
  }

  if (pending().length === 0) {
    await add(null);
    keys = await listUnrevokedSigningKeysLocked(trx);
  }
  const next = pending().find((k) => k.activates_at !== null) ?? pending()[0] ?? null;
  // A rotation due now has already moved the signing key on.
  return { active: signingAmong(keys, now)!.kid, next: next && { kid: next.kid, activates_at: next.activates_at }, created };
}

async function maintainSigningKeys(db: Database, sealer: Sealer, now: Date, policy: KeyPolicy, request: MaintenanceRequest): Promise<KeySchedule> {
  return db.transaction().execute(async (trx) => {
    await lockSigningKeys(trx);
    return maintainLocked(trx, sealer, now, policy, request);
  });
}

export class KeyRevocationRefused extends Error {}

/**
 * An emergency: the key leaves the JWKS and stops signing at once, and its private half is
 * erased. If it was signing, the next key takes over now (announced or not: a key that may have
 * leaked must not sign one more token) and a new next key is made. Null: no such key.
 */
export async function revokeSigningKeyNow(
  db: Database,
  sealer: Sealer,
  now: Date,
  policy: KeyPolicy,
  kid: string,
  actor: Actor | null = null,
): Promise<KeySchedule | null> {
  return db.transaction().execute(async (trx) => {
    await lockSigningKeys(trx);
    const keys = await listUnrevokedSigningKeysLocked(trx);
    if (!keys.some((k) => k.kid === kid)) {
      // Unknown, or revoked already (then saying so again changes nothing).
      const all = await trx.selectFrom('signing_keys').select('kid').where('kid', '=', kid).executeTakeFirst();
      return all ? maintainLocked(trx, sealer, now, policy) : null;
    }
    const usable = keys.filter((k) => k.kid !== kid && k.private_key_sealed !== null && keyState(k, now) !== 'retired');
    if (usable.length === 0) {
      throw new KeyRevocationRefused(`${kid} is the only key that can sign: rotate first (a next key is made), then revoke it`);
    }
    await revokeSigningKey(trx, kid, now);
    const wasSigning = signingAmong(keys, now)?.kid === kid;
    await recordEvents(trx, [
      { type: 'signing_key.revoked', created_at: now, actor: actorColumn(actor), data: JSON.stringify({ kid, was_signing: wasSigning }) },
    ]);
    return maintainLocked(trx, sealer, now, policy, { actor });
  });
}

export interface KeyView {
  kid: string;
  alg: string;
  state: KeyState;
  /** Whether GET /.well-known/jwks.json serves it now. */
  published: boolean;
  created_at: string;
  activates_at: string | null;
  retired_at: string | null;
  revoked_at: string | null;
  /** For a retired key: when it leaves the JWKS (its last tokens have expired). */
  published_until: string | null;
}

const iso = (date: Date | null) => (date === null ? null : date.toISOString());

function toKeyView(key: StoredSigningKey, now: Date, policy: KeyPolicy): KeyView {
  return {
    kid: key.kid,
    alg: key.alg,
    state: keyState(key, now),
    published: isPublished(key, now, policy),
    created_at: key.created_at.toISOString(),
    activates_at: iso(key.activates_at),
    retired_at: iso(key.retired_at),
    revoked_at: iso(key.revoked_at),
    published_until:
      key.revoked_at === null && key.retired_at !== null ? new Date(key.retired_at.getTime() + policy.idTokenTtlSeconds * 1000).toISOString() : null,
  };
}

export async function listKeyViews(db: Database, now: Date, policy: KeyPolicy): Promise<KeyView[]> {
  return (await listAllSigningKeys(db)).map((k) => toKeyView(k, now, policy));
}

interface LoadedKey extends KeyTimes {
  kid: string;
  alg: string;
  jwk: JWK;
  /** Null when it will never sign here (retired) or could not be opened. */
  privateKey: CryptoKey | null;
}

/**
 * The signing keys of this instance, in memory: which one signs and what the JWKS holds are
 * decided per call from the keys' timestamps and the clock, with no database read, so a rotation
 * scheduled ahead happens on every instance at the same instant. What changes the ring (a new
 * key, a revocation) reaches each instance by announcement, or within KEY_RELOAD_SECONDS by its timer.
 */
export class KeyRing {
  #keys: LoadedKey[] = [];
  #subscription: ChannelSubscription | null = null;
  #timer: NodeJS.Timeout | null = null;
  #reloading: Promise<void> | null = null;
  #reloadAgain = false;
  #reloads = 0;

  constructor(
    private readonly db: Database,
    private readonly sealer: Sealer,
    private readonly clock: Clock,
    private readonly log: Logger,
    readonly policy: KeyPolicy,
  ) {}

  /** The key new ID tokens are signed with at `now`. */
  signingKey(now: Date = this.clock.now()): { kid: string; privateKey: CryptoKey } {
    const key = signingAmong(this.#keys, now);
    if (key === null || key.privateKey === null) throw new Error(key ? `signing key ${key.kid} could not be opened` : 'no signing key');
    return { kid: key.kid, privateKey: key.privateKey };
  }

  /** GET /.well-known/jwks.json at `now`. */
  jwks(now: Date = this.clock.now()): { keys: JWK[] } {
    return { keys: this.#keys.filter((k) => isPublished(k, now, this.policy)).map((k) => k.jwk) };
  }

  /** Completed reloads, for tests that wait for an announcement to arrive. */
  get reloads(): number {
    return this.#reloads;
  }

  /** Runs the maintenance (one instance at a time), then reloads. `actor`: the operator who asked for a rotation now. */
  async maintain(rotateNow = false, actor: Actor | null = null): Promise<KeySchedule> {
    const schedule = await maintainSigningKeys(this.db, this.sealer, this.clock.now(), this.policy, { rotateNow, actor });
    await this.reload();
    return schedule;
  }

  /** Reads the ring again; calls made during a reload share one more after it. */
  reload(): Promise<void> {
    if (this.#reloading) {
      this.#reloadAgain = true;
      return this.#reloading;
    }
    this.#reloading = (async () => {
      try {
        do {
          this.#reloadAgain = false;
          await this.#load();
        } while (this.#reloadAgain);
      } finally {
        this.#reloading = null;
      }
    })();
    return this.#reloading;
  }

  async #load(): Promise<void> {
    const now = this.clock.now();
    const rows = await listLiveSigningKeys(this.db, new Date(now.getTime() - this.policy.idTokenTtlSeconds * 1000));
    const known = new Map(this.#keys.map((k) => [k.kid, k]));
    const loaded: LoadedKey[] = [];
    for (const row of rows) {
      // Private keys are opened once per process; a key's material never changes, only its times.
      let privateKey = known.get(row.kid)?.privateKey ?? null;
      if (privateKey === null && row.private_key_sealed !== null && keyState(row, now) !== 'retired') {
        try {
          const jwk = JSON.parse(this.sealer.open(row.private_key_sealed, signingKeyIdentity(row.kid)).toString('utf8')) as JWK;
          privateKey = (await importJWK(jwk, row.alg)) as CryptoKey;
        } catch (error) {
          // Published all the same: other instances may sign with it.
          this.log.error({ kid: row.kid, err: error }, 'cannot open a signing key: it will not sign on this instance');
        }
      }
      loaded.push({
        kid: row.kid,
        alg: row.alg,
        jwk: { ...(row.public_jwk as JWK), kid: row.kid, alg: row.alg, use: 'sig' },
        privateKey,
        activates_at: row.activates_at,
        retired_at: row.retired_at,
        revoked_at: row.revoked_at,
      });
    }
    this.#keys = loaded;
    this.#reloads++;
  }

  /** Listens for key changes and runs the periodic maintenance until close(). */
  async follow(database: DatabaseHandle, everyMs = KEY_RELOAD_SECONDS * 1000): Promise<void> {
    // While the database is away these fail: one info line each, no stack. The keys in memory
    // keep signing and publishing on their schedule meanwhile.
    const failed = (what: string) => (error: unknown) => {
      if (isDatabaseUnavailable(error)) this.log.info(describeUnavailable(error), `${what} failed: the database is away; the timer tries again`);
      else this.log.warn({ err: error }, `${what} failed; the timer tries again`);
    };
    const reloadQuietly = () => void this.reload().catch(failed('reloading signing keys'));
    this.#subscription = await database.listen(SIGNING_KEYS_CHANNEL, {
      onNotification: reloadQuietly,
      // Whatever was announced while not listening is read now.
      onListening: reloadQuietly,
      onListeningLost: (reason) =>
        this.log.info(describeUnavailable(reason), `not listening to signing key changes; keys are reloaded every ${everyMs / 1000} s`),
    });
    this.#timer = setInterval(() => {
      this.maintain().catch(failed('signing key maintenance'));
    }, everyMs);
    this.#timer.unref();
  }

  async close(): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
    await this.#subscription?.close();
    this.#subscription = null;
    await this.#reloading?.catch(() => {});
  }
}

/** `kid`s are RFC 7638 thumbprints (43 base64url characters); anything else names no key. */
export const KID_SYNTAX = /^[A-Za-z0-9_-]{1,128}$/;
