import type { Deps } from '../../deps.js';
import type { AdminApp } from './types.js';
import { packageVersion } from '../../lib/paths.js';
import { housekeepingHealth, problems, purged, serverInfo } from './schemas.js';

export function adminHousekeepingRoutes(app: AdminApp, deps: Deps): void {
  app.post(
    '/admin/purge',
    {
      schema: {
        tags: ['housekeeping'],
        summary: 'Delete expired requests, sessions, tokens and long-ended grants now (joins a run in progress)',
        response: { 200: purged, ...problems },
      },
    },
    async (request) => {
      const counts = await deps.housekeeping.run();
      request.audit = { action: 'purge', target: 'expired state', details: counts };
      return counts;
    },
  );

  app.get(
    '/admin/housekeeping',
    {
      schema: {
        tags: ['housekeeping'],
        summary: 'The periodic purge of this process: its last run, failures in a row, whether it is healthy',
        response: { 200: housekeepingHealth, ...problems },
      },
    },
    async () => deps.housekeeping.health(),
  );

  app.get(
    '/admin/server',
    {
      schema: {
        tags: ['housekeeping'],
        summary: 'This server: its issuer (where devices and browsers reach it) and version, for tools such as `device-auth login`',
        response: { 200: serverInfo, ...problems },
      },
    },
    async () => ({ issuer: deps.config.issuer, version: packageVersion() }),
  );
}
