import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { ConfigError, type Config } from '../config.js';
import type { Database } from '../db/connect.js';
import { actorColumn, recordEvents, type Actor } from '../events/event-log.js';
import { KeyFileError, loadOrCreateKeyFile } from './key-encryption-key-file.js';
import { SealError, Sealer } from './sealing.js';
import { ensureSealedServerSecret, listServerSecrets, lockServerSecrets, setSealedServerSecret } from '../repositories/server-secrets.js';
import { listSealedWebhookSecrets, setSealedWebhookSecret } from '../repositories/webhooks.js';
import { listClearSigningKeys, listSealedPrivateKeys, lockSigningKeys, setSealedPrivateKey } from '../repositories/signing-keys.js';
import { listSealedStreamHeaders, setSealedStreamHeader } from '../repositories/ssf-streams.js';

/** The additional authenticated data of each sealed column: a value opens only on its own row. */
const secretIdentity = (name: string) => `server_secrets:${name}`;
export const signingKeyIdentity = (kid: string) => `signing_keys:${kid}`;
/** A Shared Signals push stream's Authorization header (issue 32 §3), which we must send back, so sealed rather than hashed. */
export const streamHeaderIdentity = (streamId: string) => `ssf_streams:${streamId}:authorization_header`;
export const webhookSecretIdentity = (webhookId: string) => `webhooks:${webhookId}`;

/**
 * The key-encryption key: KEY_ENCRYPTION_KEY; else, embedded (or DEVELOPMENT_SETUP on
 * PostgreSQL, which config allows only so), the key file in DATA_DIR; else, for a database in
 * memory that dies with the process, a key that does too.
 */
export function loadSealer(config: Config, log: Logger): Sealer {
  const { current, previous, developmentSetup } = config.keyEncryption;
  if (current) return new Sealer(current, previous);
  if (config.dataDir === 'memory://' && !config.databaseUrl) return new Sealer(randomBytes(32));
  try {
    const { key, created, file } = loadOrCreateKeyFile(config.dataDir);
    if (config.databaseUrl && developmentSetup) {
      log.warn(
        { file },
        'DEVELOPMENT_SETUP: the key-encryption key is a file on this machine, not KEY_ENCRYPTION_KEY; other instances cannot read what this one seals',
      );
    }
    if (created) log.info({ file }, 'generated a key-encryption key; back it up apart from the data: without it the private keys cannot be read');
    return new Sealer(key);
  } catch (error) {
    if (error instanceof KeyFileError) throw new ConfigError(`invalid configuration: KEY_ENCRYPTION_KEY: ${error.message}`);
    throw error;
  }
}

/** A sealed value that will not open is a configuration problem: the wrong key was given. */
export function asConfigError(error: unknown): unknown {
  return error instanceof SealError ? new ConfigError(`invalid configuration: KEY_ENCRYPTION_KEY: ${error.message}`) : error;
}

/**
 * A clear private key or server secret in a database that already holds sealed ones: someone
 * with write access to the database (but not the key-encryption key) may have planted a known
 * signing key, which sealing would have made the server's own. Never sealed silently.
 */
export class ClearRowInSealedDatabaseError extends Error {}

/**
 * Seals what earlier versions stored in the clear (private JWKs, server secrets) and empties the
 * clear columns, in one transaction, so a database is never half sealed. Every start runs it;
 * after the first it finds nothing. Only a database with nothing sealed yet (one from before
 * sealing) is sealed so: once anything is sealed, a clear row is refused with an error naming it.
 */
export async function sealClearRows(db: Database, sealer: Sealer): Promise<{ signingKeys: number; serverSecrets: number }> {
  return db.transaction().execute(async (trx) => {
    await lockSigningKeys(trx);
    await lockServerSecrets(trx);
    const keys = await listClearSigningKeys(trx);
    const allSecrets = await listServerSecrets(trx);
    const secrets = allSecrets.filter((s) => s.value !== null);
    if (keys.length + secrets.length === 0) return { signingKeys: 0, serverSecrets: 0 };
    const alreadySealed = allSecrets.some((s) => s.sealed_value !== null) || (await listSealedPrivateKeys(trx)).length > 0;
    if (alreadySealed) {
      const rows = [...keys.map((k) => signingKeyIdentity(k.kid)), ...secrets.map((s) => secretIdentity(s.name))];
      throw new ClearRowInSealedDatabaseError(
        `this database is sealed under a key-encryption key, yet ${rows.join(', ')} ${rows.length === 1 ? 'holds a value' : 'hold values'} in the clear: ` +
          'refused, not sealed (it may have been planted by someone with write access to the database). Find out how it got there; ' +
          'delete the row (a server secret or a signing key is made anew) and start again',
      );
    }
    for (const key of keys) {
      await setSealedPrivateKey(trx, key.kid, sealer.seal(Buffer.from(JSON.stringify(key.private_jwk)), signingKeyIdentity(key.kid)));
    }
    for (const secret of secrets) await setSealedServerSecret(trx, secret.name, sealer.seal(secret.value!, secretIdentity(secret.name)));
    return { signingKeys: keys.length, serverSecrets: secrets.length };
  });
}

/**
 * A secret every instance on this database shares, made by whichever starts first. Only its
 * sealed form reaches the database; the clear bytes live in this process.
 */
export async function ensureServerSecret(db: Database, sealer: Sealer, name: string, candidate: Uint8Array): Promise<Buffer> {
  const stored = await ensureSealedServerSecret(db, name, sealer.seal(candidate, secretIdentity(name)));
  if (stored.sealed_value === null) throw new SealError(`server secret ${name} is not sealed yet`);
  return sealer.open(stored.sealed_value, secretIdentity(name));
}

/**
 * Re-seals every sealed value under the current key-encryption key (the previous one opens what
 * it sealed), so that the previous key can be dropped. Values already under the current key are
 * left as they are, so running it twice, or beside running servers, is harmless.
 *
 * A run that re-sealed anything records key_encryption_key.rewrapped in the same transaction
 * (issue 32 §1: every operator's change, with who made it): how many values of each kind and the
 * new key's id, which is a fingerprint, never the key. A run that found nothing to do records nothing.
 */
export async function rewrapAll(
  db: Database,
  sealer: Sealer,
  change: { now: Date; actor: Actor },
): Promise<{ signing_keys: number; server_secrets: number; webhook_secrets: number; ssf_stream_headers: number; key_encryption_key: string }> {
  await sealClearRows(db, sealer);
  /** Re-seals each row's value that another key sealed; how many. */
  const rewrap = async <R>(
    rows: readonly R[],
    sealed: (row: R) => Uint8Array | null,
    identity: (row: R) => string,
    store: (row: R, value: Buffer) => Promise<void>,
  ) => {
    let count = 0;
    for (const row of rows) {
      const value = sealed(row);
      if (value === null || sealer.sealedUnder(value) === sealer.currentId) continue;
      await store(row, sealer.seal(sealer.open(value, identity(row)), identity(row)));
      count++;
    }
    return count;
  };
  return db.transaction().execute(async (trx) => {
    await lockSigningKeys(trx);
    await lockServerSecrets(trx);
    const keys = await rewrap(
      await listSealedPrivateKeys(trx),
      (row) => row.private_key_sealed,
      (row) => signingKeyIdentity(row.kid),
      (row, value) => setSealedPrivateKey(trx, row.kid, value),
    );
    const secrets = await rewrap(
      await listServerSecrets(trx),
      (row) => row.sealed_value,
      (row) => secretIdentity(row.name),
      (row, value) => setSealedServerSecret(trx, row.name, value),
    );
    const headers = await rewrap(
      await listSealedStreamHeaders(trx),
      (row) => row.authorization_header_sealed,
      (row) => streamHeaderIdentity(row.stream_id),
      (row, value) => setSealedStreamHeader(trx, row.stream_id, value),
    );
    const webhookSecrets = await rewrap(
      await listSealedWebhookSecrets(trx),
      (row) => row.sealed_secret,
      (row) => webhookSecretIdentity(row.webhook_id),
      (row, value) => setSealedWebhookSecret(trx, row.webhook_id, value),
    );
    const rewrapped = {
      signing_keys: keys,
      server_secrets: secrets,
      webhook_secrets: webhookSecrets,
      ssf_stream_headers: headers,
      key_encryption_key: sealer.currentId,
    };
    if (keys + secrets + webhookSecrets + headers > 0)
      await recordEvents(trx, [
        { type: 'key_encryption_key.rewrapped', created_at: change.now, actor: actorColumn(change.actor), data: JSON.stringify(rewrapped) },
      ]);
    return rewrapped;
  });
}
