import { defineConfig } from 'vitest/config';

/**
 * The unit tier (`npm run check`): tests that need no database, no server process and no browser,
 * so the fast check runs anywhere in well under a minute. No globalSetup: nothing to migrate.
 * A test that later needs a database belongs in the main suite (vitest.config.ts), which runs
 * these files too.
 */
export default defineConfig({
  test: {
    include: [
      'test/unit/**/*.test.ts',
      'test/architecture/**/*.test.ts',
      // Pure tests that predate test/unit/: parsers, address arithmetic, catalogues, the proximity rules.
      'test/lib/*.test.ts',
      'test/geo/asn-table.test.ts',
      'test/i18n/catalogues.test.ts',
      'test/oauth/proximity-pairs.test.ts',
    ],
    passWithNoTests: true,
    pool: 'forks',
    testTimeout: 30_000,
    maxWorkers: 2,
  },
});
