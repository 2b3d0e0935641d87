import { execFile } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pino from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { createDeps } from '../../src/compose.js';
import { GeoDatabaseError } from '../../src/geo/locate.js';
import { systemClock } from '../../src/lib/clock.js';
import { TEST_KEY_ENCRYPTION_KEY } from '../helpers/app.js';
import { BIN } from '../helpers/cli.js';
import { createTestDatabase } from '../helpers/database.js';

/** Issue 29 §6: the CLI runs the built code when it is current, and reads location data only when used. */

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const folders: string[] = [];
afterAll(() => {
  for (const dir of folders) rmSync(dir, { recursive: true, force: true });
});

function run(bin: string): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [bin, '--version'], { env: { PATH: process.env.PATH }, timeout: 60_000 }, (error, stdout, stderr) =>
      resolve({ code: error ? 1 : 0, stdout, stderr }),
    );
  });
}

describe('bin/device-auth.js', () => {
  /** A checkout in miniature: the real launcher, a "built" and a "source" entry point that say which ran. */
  function checkout() {
    const dir = mkdtempSync(path.join(tmpdir(), 'device-auth-launcher-'));
    folders.push(dir);
    mkdirSync(path.join(dir, 'bin'));
    mkdirSync(path.join(dir, 'dist/src/cli'), { recursive: true });
    mkdirSync(path.join(dir, 'src/cli'), { recursive: true });
    copyFileSync(BIN, path.join(dir, 'bin/device-auth.js'));
    symlinkSync(path.join(ROOT, 'node_modules'), path.join(dir, 'node_modules'));
    writeFileSync(path.join(dir, 'package.json'), '{"type":"module"}');
    writeFileSync(path.join(dir, 'dist/src/cli/main.js'), "console.log('built');\n");
    writeFileSync(path.join(dir, 'src/cli/main.ts'), "const ran: string = 'source';\nconsole.log(ran);\n");
    const at = (file: string, seconds: number) => utimesSync(path.join(dir, file), seconds, seconds);
    return { bin: path.join(dir, 'bin/device-auth.js'), at };
  }

  it('runs dist/ when no TypeScript source is newer than it', async () => {
    const { bin, at } = checkout();
    at('src/cli/main.ts', 1_700_000_000);
    at('dist/src/cli/main.js', 1_700_000_100);
    expect((await run(bin)).stdout).toBe('built\n');
  });

  it('runs the source through tsx when a source file is newer than the build', async () => {
    const { bin, at } = checkout();
    at('dist/src/cli/main.js', 1_700_000_000);
    at('src/cli/main.ts', 1_700_000_100);
    const result = await run(bin);
    expect(result.stdout, result.stderr).toBe('source\n');
  });
});

describe('location data in the CLI', () => {
  it('is not read when the dependencies are made, only at the first lookup (a bad GEOIP_DATABASE shows only then)', async () => {
    const database = await createTestDatabase();
    const config = loadConfig({
      ISSUER: 'http://localhost:3000',
      KEY_ENCRYPTION_KEY: TEST_KEY_ENCRYPTION_KEY,
      GEOIP_DATABASE: path.join(ROOT, 'package.json'),
    });
    const deps = await createDeps({ database: database.handle, config, log: pino({ level: 'silent' }), clock: systemClock, locationData: 'on-first-use' });
    try {
      expect(() => deps.geo.locate('79.192.0.1')).toThrow(GeoDatabaseError);
    } finally {
      await deps.close();
      await database.drop();
    }
  });
});
