import { z } from 'zod';
import type { Deps } from '../../deps.js';
import { findEvents } from '../../accounts/events.js';
import type { AdminApp } from './types.js';
import { notFound } from './problem.js';
import { emailText, eventView, nextAfter, page, pageQuery, problems } from './schemas.js';
import { CLIENT_ID_SYNTAX } from '../../oauth/client-auth.js';

export function adminEventRoutes(app: AdminApp, deps: Deps): void {
  app.get(
    '/admin/events',
    {
      schema: {
        tags: ['events'],
        summary: 'What happened to grants and why (issued, rotated, revoked with the reason), oldest first',
        querystring: z.object({
          ...pageQuery,
          user: emailText.optional().describe('only this user\'s (email)'),
          client: z.string().regex(CLIENT_ID_SYNTAX, 'not a client id').optional().describe('only this app\'s'),
          since: z.iso.datetime({ offset: true }).optional().describe('only events at or after this time (ISO 8601)'),
          after: z.string().regex(/^[1-9]\d{0,18}$/, 'an event_id').optional().describe('the last event_id of the previous page'),
        }),
        response: { 200: page(eventView), ...problems },
      },
    },
    async (request) => {
      const { user, client, since, after, limit } = request.query;
      const result = await findEvents(deps.db, { userEmail: user, clientId: client, since: since ? new Date(since) : undefined, after, limit });
      if (result.kind === 'unknown_user') throw notFound(`no user ${user}`);
      if (result.kind === 'unknown_client') throw notFound(`no client ${client}`);
      return { items: result.events, next_after: nextAfter(result.events, limit, (e) => e.event_id) };
    },
  );
}
