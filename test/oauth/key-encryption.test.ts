import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';
import { KEY_FILE_NAME } from '../../src/keys/key-encryption-key-file.js';
import { Sealer } from '../../src/keys/sealing.js';
import { rewrapAll, signingKeyIdentity, streamHeaderIdentity } from '../../src/keys/key-encryption.js';
import { startTestApp, TEST_KEY_ENCRYPTION_KEY, type TestApp } from '../helpers/app.js';
import { createTestDatabase } from '../helpers/database.js';
import { createStream, PUSH, seedReceiver } from '../helpers/ssf.js';

/**
 * Issue 22 §3: private keys and the server's HMAC keys are sealed (AES-256-GCM) under a
 * key-encryption key from the environment, so a dump of the database alone cannot sign a token.
 */

const folders: string[] = [];
const tempDir = () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'device-auth-kek-'));
  folders.push(dir);
  return dir;
};
afterAll(() => {
  for (const dir of folders) rmSync(dir, { recursive: true, force: true });
});

const opened: TestApp[] = [];
afterEach(async () => {
  for (const t of opened.reverse()) await t.close();
  opened.length = 0;
});
async function start(options: Parameters<typeof startTestApp>[0] = {}) {
  const t = await startTestApp(options);
  opened.push(t);
  return t;
}

const newKey = () => randomBytes(32).toString('base64');

/** Every row of both tables as PostgreSQL prints it: what a dump would hold. */
async function dumped(t: TestApp): Promise<string> {
  const keys = await sql<{ row: string }>`SELECT s::text AS row FROM signing_keys s`.execute(t.deps.db);
  const secrets = await sql<{ row: string }>`SELECT s::text AS row FROM server_secrets s`.execute(t.deps.db);
  return [...keys.rows, ...secrets.rows].map((r) => r.row).join('\n');
}

describe('keys at rest', () => {
  it('after start, no row of signing_keys or server_secrets holds a private key or an HMAC key in the clear', async () => {
    const t = await start();
    const dump = await dumped(t);
    const rows = await t.deps.db.selectFrom('signing_keys').select(['kid', 'private_key_sealed', 'private_jwk']).execute();
    expect(rows.length).toBeGreaterThanOrEqual(2);
    for (const row of rows) {
      expect(row.private_jwk).toBeNull();
      const jwk = JSON.parse(t.deps.sealer.open(row.private_key_sealed!, signingKeyIdentity(row.kid)).toString('utf8'));
      for (const part of ['d', 'p', 'q', 'dp', 'dq', 'qi']) {
        expect(jwk[part]).toMatch(/^[A-Za-z0-9_-]{40,}$/);
        expect(dump).not.toContain(jwk[part]);
        expect(dump).not.toContain(Buffer.from(jwk[part], 'base64url').toString('hex'));
      }
    }
    for (const key of Object.values(t.deps.secrets)) {
      expect(dump).not.toContain(key.toString('hex'));
      expect(dump).not.toContain(key.toString('base64'));
    }
  });

  it('a wrong KEY_ENCRYPTION_KEY stops the start with a clear error naming both keys', async () => {
    const t = await start();
    const other = newKey();
    const refused = startTestApp({ database: t.database, env: { KEY_ENCRYPTION_KEY: other } });
    await expect(refused).rejects.toThrow(ConfigError);
    await expect(refused).rejects.toThrow(
      /KEY_ENCRYPTION_KEY: server_secrets:\S+ is sealed under key-encryption key [0-9a-f]{16}, but KEY_ENCRYPTION_KEY is [0-9a-f]{16}/,
    );
  });

  it('a sealed value moved onto another row does not open', async () => {
    const t = await start();
    await sql`UPDATE server_secrets SET sealed_value = (SELECT sealed_value FROM server_secrets WHERE name = 'user_code_hmac_key')
              WHERE name = 'anonymous_csrf_hmac_key'`.execute(t.deps.db);
    await expect(startTestApp({ database: t.database })).rejects.toThrow(/anonymous_csrf_hmac_key does not open .* altered or moved from another row/);
  });

  it('PostgreSQL without KEY_ENCRYPTION_KEY is refused unless it is a development setup; a malformed key is refused without echoing it', () => {
    expect(() => loadConfig({ DATABASE_URL: 'postgres://db/x' })).toThrow(
      /^invalid configuration: KEY_ENCRYPTION_KEY: is required with DATABASE_URL.*DEVELOPMENT_SETUP=true/,
    );
    expect(loadConfig({ DATABASE_URL: 'postgres://db/x', DEVELOPMENT_SETUP: 'true' }).keyEncryption.current).toBeNull();
    expect(loadConfig({ DATABASE_URL: 'postgres://db/x', KEY_ENCRYPTION_KEY: newKey() }).keyEncryption.current).toHaveLength(32);
    // base64url is taken as well.
    expect(loadConfig({ KEY_ENCRYPTION_KEY: randomBytes(32).toString('base64url') }).keyEncryption.current).toHaveLength(32);
    for (const bad of ['c2hvcnQ=', randomBytes(31).toString('base64'), randomBytes(33).toString('base64'), `${newKey()} `, `${'x'.repeat(43)}!`]) {
      let message = '';
      try {
        loadConfig({ KEY_ENCRYPTION_KEY: bad });
      } catch (error) {
        message = (error as Error).message;
      }
      expect(message).toMatch(/^invalid configuration: KEY_ENCRYPTION_KEY: must be 32 bytes/);
      expect(message).not.toContain(bad.trim());
    }
    expect(() => loadConfig({ KEY_ENCRYPTION_KEY_PREVIOUS: newKey() })).toThrow(/KEY_ENCRYPTION_KEY_PREVIOUS: needs KEY_ENCRYPTION_KEY/);
  });

  it('the server on PostgreSQL without a key-encryption key exits 2 before connecting, with one line saying what to set', async () => {
    const res = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
      execFile(
        process.execPath,
        ['--import', 'tsx', path.resolve('src/server.ts')],
        { env: { PATH: process.env.PATH, DATABASE_URL: 'postgres://127.0.0.1:1/nothing', DATA_DIR: tempDir() }, timeout: 30_000 },
        (error, _stdout, stderr) => resolve({ code: error ? ((error.code as number) ?? 1) : 0, stderr }),
      );
    });
    expect(res.code).toBe(2);
    expect(res.stderr.trim().split('\n')).toEqual([expect.stringMatching(/^invalid configuration: KEY_ENCRYPTION_KEY: is required with DATABASE_URL/)]);
  });

  it('embedded without KEY_ENCRYPTION_KEY keeps a generated key in DATA_DIR, mode 0600, used again at the next start; a file others may read is refused', async () => {
    const dataDir = tempDir();
    const env = { DATA_DIR: dataDir, KEY_ENCRYPTION_KEY: '' };
    const first = await start({ env });
    const file = path.join(dataDir, KEY_FILE_NAME);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const userCodeKey = first.deps.secrets.userCodeKey;
    const again = await startTestApp({ database: first.database, env });
    expect(again.deps.secrets.userCodeKey.equals(userCodeKey)).toBe(true);
    await again.close();

    chmodSync(file, 0o644);
    await expect(startTestApp({ database: first.database, env })).rejects.toThrow(
      /key-encryption-key is readable or writable by others \(mode 644\): chmod 600/,
    );
  });

  it('rewrap re-seals everything under the new key with the previous one beside it; afterwards the previous key is no longer needed', async () => {
    const t = await start();
    const userCodeKey = t.deps.secrets.userCodeKey;
    const signing = t.deps.keys.signingKey().kid;
    const current = Buffer.from(TEST_KEY_ENCRYPTION_KEY, 'base64');
    const next = randomBytes(32);
    // During the rollout: instances with the new key and the previous one start and sign.
    const during = await startTestApp({
      database: t.database,
      env: { KEY_ENCRYPTION_KEY: next.toString('base64'), KEY_ENCRYPTION_KEY_PREVIOUS: TEST_KEY_ENCRYPTION_KEY },
    });
    expect(during.deps.keys.signingKey().kid).toBe(signing);
    await during.close();

    // A Shared Signals push stream's Authorization header is sealed too (issue 32 §3).
    const receiver = await seedReceiver(t);
    const stream = await createStream(t, receiver, {
      delivery: { method: PUSH, endpoint_url: 'https://receiver.example/e', authorization_header: 'Bearer kept-secret' },
    });

    const byTheCli = { now: t.clock.now(), actor: { kind: 'admin', via: 'cli' } } as const;
    const result = await rewrapAll(t.deps.db, new Sealer(next, current), byTheCli);
    expect(result).toMatchObject({
      signing_keys: 2,
      server_secrets: Object.keys(t.deps.secrets).length,
      ssf_stream_headers: 1,
      key_encryption_key: new Sealer(next).currentId,
    });
    // Twice changes nothing, and records nothing.
    expect(await rewrapAll(t.deps.db, new Sealer(next, current), byTheCli)).toMatchObject({ signing_keys: 0, server_secrets: 0, ssf_stream_headers: 0 });
    // Issue 32 §1: the operator's change is in the log once, with who made it and how many values
    // moved; the new key's id is a fingerprint, and no sealed or clear value is in the event.
    const events = await t.deps.db.selectFrom('events').selectAll().where('type', '=', 'key_encryption_key.rewrapped').execute();
    expect(events).toHaveLength(1);
    expect(events[0]?.actor).toEqual({ kind: 'admin', via: 'cli' });
    expect(events[0]?.data).toEqual({ ...result });
    expect(JSON.stringify(events[0])).not.toContain(next.toString('base64'));
    const header = await t.deps.db
      .selectFrom('ssf_streams')
      .select('authorization_header_sealed')
      .where('stream_id', '=', stream.stream_id)
      .executeTakeFirstOrThrow();
    expect(new Sealer(next).open(header.authorization_header_sealed!, streamHeaderIdentity(stream.stream_id)).toString('utf8')).toBe('Bearer kept-secret');

    const after = await startTestApp({ database: t.database, env: { KEY_ENCRYPTION_KEY: next.toString('base64') } });
    try {
      expect(after.deps.secrets.userCodeKey.equals(userCodeKey)).toBe(true);
      expect(after.deps.keys.signingKey().kid).toBe(signing);
    } finally {
      await after.close();
    }
    // And the old key alone no longer opens anything.
    await expect(startTestApp({ database: t.database })).rejects.toThrow(/sealed under key-encryption key/);
  });

  it('a database created before sealing is sealed at the first start with a key', async () => {
    const database = await createTestDatabase();
    try {
      await sql`INSERT INTO server_secrets (name, value) VALUES ('user_code_hmac_key', ${Buffer.alloc(32, 9)})`.execute(database.handle.db);
      const t = await startTestApp({ database });
      try {
        expect(t.deps.secrets.userCodeKey.equals(Buffer.alloc(32, 9))).toBe(true);
        const row = await t.deps.db
          .selectFrom('server_secrets')
          .select(['value', 'sealed_value'])
          .where('name', '=', 'user_code_hmac_key')
          .executeTakeFirstOrThrow();
        expect(row.value).toBeNull();
        expect(row.sealed_value).not.toBeNull();
      } finally {
        await t.close();
      }
    } finally {
      await database.drop();
    }
  });
});
