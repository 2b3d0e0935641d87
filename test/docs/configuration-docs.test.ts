import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { CONFIGURATION_PAGE, renderConfigurationPage } from '../../scripts/config-docs.js';
import { environmentVariables, loadConfig } from '../../src/config.js';

/**
 * Issue 30 §3: docs/configuration.md is written from the configuration schema by
 * `npm run docs:config`; a schema or meaning changed without running it fails here.
 */
describe('docs/configuration.md', () => {
  it('is exactly what `npm run docs:config` writes from the schema (run it after changing src/config.ts)', () => {
    expect(readFileSync(CONFIGURATION_PAGE, 'utf8')).toBe(renderConfigurationPage());
  });

  it('has one row for every variable the schema reads, and no other', () => {
    const page = renderConfigurationPage();
    const rows = [...page.matchAll(/^\| `([A-Z0-9_]+)` \|/gm)].map((match) => match[1]);
    expect(rows.sort()).toEqual(Object.keys(environmentVariables.shape).sort());
  });

  it('states the defaults the server really uses', () => {
    // The schema with nothing set: each default the page shows in code is the value the server gets.
    const page = renderConfigurationPage();
    const config = loadConfig({});
    const shown = (name: string) => new RegExp(`^\\| \`${name}\` \\| \`([^\`]*)\` \\|`, 'm').exec(page)?.[1];
    expect(shown('PORT')).toBe(String(config.port));
    expect(shown('REFRESH_RETRY_WINDOW')).toBe(String(config.refreshRetryWindow));
    expect(shown('RATE_LIMIT_SIGNIN_PER_IP')).toBe(`${config.rateLimits.signInPerIp!.max}/${config.rateLimits.signInPerIp!.windowSeconds}`);
    expect(shown('DATABASE_PREPARED_STATEMENTS')).toBe(String(config.databasePreparedStatements));
    expect(shown('HTTP_KEEP_ALIVE_TIMEOUT')).toBe(String(config.http.keepAliveTimeoutSeconds));
  });
});
