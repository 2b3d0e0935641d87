import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';

/**
 * AES-256-GCM under a key-encryption key (KEK) from the environment, for what the database must
 * hold but a copy of the database alone must not reveal: private signing keys, HMAC keys.
 *
 * A sealed value is `version (1) | KEK id (8) | IV (12) | ciphertext | tag (16)`. The KEK id (the
 * first bytes of the KEK's SHA-256) lets a value sealed under another key fail with a message that
 * says so, instead of GCM's bare "unable to authenticate". The additional authenticated data is
 * the row's identity ("signing_keys:<kid>"), so a sealed value copied onto another row does not open.
 */
const VERSION = 1;
const ID_BYTES = 8;
const IV_BYTES = 12;
const TAG_BYTES = 16;
const HEADER_BYTES = 1 + ID_BYTES + IV_BYTES;

export class SealError extends Error {}

const keyEncryptionKeyId = (key: Uint8Array): string => createHash('sha256').update(key).digest().subarray(0, ID_BYTES).toString('hex');

export class Sealer {
  readonly currentId: string;
  readonly #keys = new Map<string, Buffer>();

  /** `previous`: a key still accepted for opening while its values are re-sealed (KEY_ENCRYPTION_KEY_PREVIOUS). */
  constructor(current: Uint8Array, previous: Uint8Array | null = null) {
    if (current.length !== 32 || (previous !== null && previous.length !== 32)) throw new SealError('a key-encryption key has 32 bytes');
    this.currentId = keyEncryptionKeyId(current);
    this.#keys.set(this.currentId, Buffer.from(current));
    if (previous !== null) this.#keys.set(keyEncryptionKeyId(previous), Buffer.from(previous));
  }

  seal(plain: Uint8Array, identity: string): Buffer {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.#keys.get(this.currentId)!, iv);
    cipher.setAAD(Buffer.from(identity, 'utf8'));
    const body = Buffer.concat([cipher.update(plain), cipher.final()]);
    return Buffer.concat([Buffer.from([VERSION]), Buffer.from(this.currentId, 'hex'), iv, body, cipher.getAuthTag()]);
  }

  /** The KEK id a sealed value names, or null if it is not a sealed value of ours. */
  sealedUnder(sealed: Uint8Array): string | null {
    if (sealed.length < HEADER_BYTES + TAG_BYTES || sealed[0] !== VERSION) return null;
    return Buffer.from(sealed.subarray(1, 1 + ID_BYTES)).toString('hex');
  }

  open(sealed: Uint8Array, identity: string): Buffer {
    const id = this.sealedUnder(sealed);
    if (id === null) throw new SealError(`${identity} is not a sealed value`);
    const key = this.#keys.get(id);
    if (!key) {
      throw new SealError(
        `${identity} is sealed under key-encryption key ${id}, but KEY_ENCRYPTION_KEY is ${this.currentId}: ` +
          'start with the key it was sealed under (during a key rotation, as KEY_ENCRYPTION_KEY_PREVIOUS)',
      );
    }
    const bytes = Buffer.from(sealed);
    const decipher = createDecipheriv('aes-256-gcm', key, bytes.subarray(1 + ID_BYTES, HEADER_BYTES));
    decipher.setAAD(Buffer.from(identity, 'utf8'));
    decipher.setAuthTag(bytes.subarray(bytes.length - TAG_BYTES));
    try {
      return Buffer.concat([decipher.update(bytes.subarray(HEADER_BYTES, bytes.length - TAG_BYTES)), decipher.final()]);
    } catch {
      // The key's id matched, so the value was altered or belongs to another row.
      throw new SealError(`${identity} does not open under key-encryption key ${id}: it was altered or moved from another row`);
    }
  }
}
