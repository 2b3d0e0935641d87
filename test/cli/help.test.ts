import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runCli } from '../../src/cli/main.js';
import { runProgram } from '../helpers/cli.js';

/**
 * Issue 19 §3: `--help` on every command and subcommand prints its help and executes nothing
 * (`purge --help` once purged, `migrate --help` migrated); `--version` prints the version.
 */

const parent = mkdtempSync(path.join(tmpdir(), 'device-auth-help-'));
afterAll(() => rmSync(parent, { recursive: true, force: true }));

const COMMANDS = [
  ['migrate'],
  ['purge'],
  ['events'],
  ['login'],
  ['client'],
  ['client', 'create'],
  ['client', 'list'],
  ['client', 'show'],
  ['client', 'update'],
  ['client', 'rotate-secret'],
  ['client', 'disable'],
  ['client', 'enable'],
  ['client', 'delete'],
  ['user'],
  ['user', 'create'],
  ['user', 'list'],
  ['user', 'show'],
  ['user', 'update'],
  ['user', 'set-password'],
  ['user', 'ban'],
  ['user', 'unban'],
  ['user', 'delete'],
  ['user', 'devices'],
  ['user', 'sign-out'],
  ['user', 'apps'],
  ['user', 'remove-access'],
  ['housekeeping'],
  ['webhooks'],
  ['webhooks', 'add'],
  ['webhooks', 'list'],
  ['webhooks', 'show'],
  ['webhooks', 'pause'],
  ['webhooks', 'resume'],
  ['webhooks', 'remove'],
  ['webhooks', 'deliveries'],
  ['webhooks', 'replay'],
];

describe('help and version execute nothing', () => {
  it.each(COMMANDS.flatMap((command) => [[[...command, '--help'].join(' ')], [[...command, '-h'].join(' ')]]))(
    "`device-auth %s` prints that command's usage and opens no database",
    async (line) => {
      const dataDir = path.join(parent, line.replace(/\W+/g, '_'));
      const saved = process.env.DATA_DIR;
      process.env.DATA_DIR = dataDir;
      try {
        const argv = line.split(' ');
        const help = await runCli(argv, { env: {}, stdin: process.stdin, prompt: process.stderr });
        expect(typeof help).toBe('string');
        expect(help as string).toMatch(/^usage: device-auth/);
        for (const word of argv.filter((w) => !w.startsWith('-'))) expect(help as string).toContain(word);
        // Had it run, the embedded database would have been created there.
        expect(existsSync(dataDir)).toBe(false);
      } finally {
        if (saved === undefined) delete process.env.DATA_DIR;
        else process.env.DATA_DIR = saved;
      }
    },
  );

  it('the real program: `purge --help` and `migrate --help` exit 0 with their usage and create no data folder; --version prints the version', async () => {
    const dataDir = path.join(parent, 'program');
    const env = { DATA_DIR: dataDir };
    const [purge, migrate, version] = await Promise.all([
      runProgram(['purge', '--help'], env),
      runProgram(['migrate', '--help'], env),
      runProgram(['--version'], env),
    ]);
    expect(purge.code).toBe(0);
    expect(purge.stdout).toContain('purge');
    expect(migrate.code).toBe(0);
    expect(migrate.stdout).toContain('migrate');
    expect(existsSync(dataDir)).toBe(false);
    const { version: expected } = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
    expect(version.code).toBe(0);
    expect(version.stdout.trim()).toBe(`device-auth ${expected}`);
  });
});
