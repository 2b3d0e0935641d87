import { defineConfig } from 'vitest/config';

/**
 * The browser suite (`npm run test:e2e`): Chromium driven by playwright-core, kept apart so that
 * `npm test` passes where no browser is installed. One file at a time: a browser and a server on
 * two cores is enough.
 */
export default defineConfig({
  test: {
    include: ['test/e2e/**/*.test.ts'],
    globalSetup: ['test/helpers/global-setup.ts'],
    pool: 'forks',
    fileParallelism: false,
    maxWorkers: 1,
    testTimeout: 90_000,
    hookTimeout: 120_000,
  },
});
