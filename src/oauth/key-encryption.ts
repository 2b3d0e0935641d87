import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { ConfigError, type Config } from '../config.js';
import type { Database } from '../db/connect.js';
import { KeyFileError, loadOrCreateKeyFile } from '../lib/key-encryption-key-file.js';
import { SealError, Sealer } from '../lib/sealing.js';
import { ensureSealedServerSecret, listServerSecrets, lockServerSecrets, setSealedServerSecret } from '../repositories/server-secrets.js';
import { listClearSigningKeys, listSealedPrivateKeys, lockSigningKeys, setSealedPrivateKey } from '../repositories/signing-keys.js';

/** The additional authenticated data of each sealed column: a value opens only on its own row. */
export const secretIdentity = (name: string) => `server_secrets:${name}`;
export const signingKeyIdentity = (kid: string) => `signing_keys:${kid}`;

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
      log.warn({ file }, 'DEVELOPMENT_SETUP: the key-encryption key is a file on this machine, not KEY_ENCRYPTION_KEY; other instances cannot read what this one seals');
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
 */
export async function rewrapAll(db: Database, sealer: Sealer): Promise<{ signing_keys: number; server_secrets: number; key_encryption_key: string }> {
  await sealClearRows(db, sealer);
  return db.transaction().execute(async (trx) => {
    await lockSigningKeys(trx);
    await lockServerSecrets(trx);
    let keys = 0;
    for (const row of await listSealedPrivateKeys(trx)) {
      if (sealer.sealedUnder(row.private_key_sealed) === sealer.currentId) continue;
      const identity = signingKeyIdentity(row.kid);
      await setSealedPrivateKey(trx, row.kid, sealer.seal(sealer.open(row.private_key_sealed, identity), identity));
      keys++;
    }
    let secrets = 0;
    for (const row of await listServerSecrets(trx)) {
      if (row.sealed_value === null || sealer.sealedUnder(row.sealed_value) === sealer.currentId) continue;
      const identity = secretIdentity(row.name);
      await setSealedServerSecret(trx, row.name, sealer.seal(sealer.open(row.sealed_value, identity), identity));
      secrets++;
    }
    return { signing_keys: keys, server_secrets: secrets, key_encryption_key: sealer.currentId };
  });
}
