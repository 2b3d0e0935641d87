import { randomBytes } from 'node:crypto';
import { linkSync, mkdirSync, readFileSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';

export const KEY_FILE_NAME = 'key-encryption-key';

export class KeyFileError extends Error {}

/**
 * The embedded database's key-encryption key, kept beside it in DATA_DIR when none is given in the
 * environment: made on first start (mode 0600, readable by the server's user alone) and read after.
 * A file that others may read is refused, as ssh refuses such a private key: a copy of DATA_DIR
 * would then carry its own key. The key is written to a private temporary file and linked into
 * place, so a reader never sees a half-written file and two starters cannot both write one.
 */
export function loadOrCreateKeyFile(dataDir: string): { key: Buffer; created: boolean; file: string } {
  const file = path.join(dataDir, KEY_FILE_NAME);
  let created = false;
  try {
    statSync(file);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    mkdirSync(dataDir, { recursive: true, mode: 0o700 });
    const temporary = `${file}.${process.pid}.${randomBytes(4).toString('hex')}`;
    writeFileSync(temporary, `${randomBytes(32).toString('base64')}\n`, { mode: 0o600, flag: 'wx' });
    try {
      linkSync(temporary, file);
      created = true;
    } catch (linkError) {
      if ((linkError as NodeJS.ErrnoException).code !== 'EEXIST') throw linkError;
    } finally {
      unlinkSync(temporary);
    }
  }
  const mode = statSync(file).mode & 0o777;
  if ((mode & 0o077) !== 0) {
    throw new KeyFileError(`${file} is readable or writable by others (mode ${mode.toString(8)}): chmod 600 it, as it protects the private keys`);
  }
  const key = Buffer.from(readFileSync(file, 'utf8').trim(), 'base64');
  if (key.length !== 32) throw new KeyFileError(`${file} does not hold a 32-byte base64 key`);
  return { key, created, file };
}
