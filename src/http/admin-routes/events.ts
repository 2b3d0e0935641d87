import { z } from 'zod';
import type { Deps } from '../../deps.js';
import { findEvents, tailEventLog, type EventQuery } from '../../accounts/events.js';
import { EVENT_TYPES, isEventType } from '../../events/vocabulary.js';
import { storedText } from '../../lib/stored-text.js';
import type { AdminApp } from './types.js';
import { notFound } from './problem.js';
import { eventView, listOf, nextAfter, page, pageQuery, problems } from './schemas.js';
import { CLIENT_ID_SYNTAX } from '../../oauth/client-auth.js';

const tags = ['events'];

/** The longest a tail request waits for an event before answering with none. */
const MAX_TAIL_WAIT_SECONDS = 25;

const instant = z.iso.datetime({ offset: true });
const clientId = z.string().regex(CLIENT_ID_SYNTAX, 'not a client id');

/** The filters of both routes: each given must hold. */
const eventFilters = {
  type: listOf(z.string().refine(isEventType, 'not a name of the event vocabulary (GET /admin/openapi.json lists them)'), 'event type', EVENT_TYPES.length)
    .optional()
    .describe(`only events of these types (comma-separated names of the vocabulary; an unknown name is refused): ${EVENT_TYPES.join(', ')}`),
  user: storedText.min(1).max(254).optional().describe("only this user's: their email while the account exists, or their user_id (also after it was deleted)"),
  app: clientId.optional().describe("only this app's (a client_id), whether it still exists or not"),
  client: clientId.optional().describe('the same as app (its older name)'),
  grant: z.uuid().optional().describe("only this grant's"),
  since: instant.optional().describe('only events at or after this time (ISO 8601)'),
  until: instant.optional().describe('only events before this time (ISO 8601)'),
};

type Filters = { [K in keyof typeof eventFilters]?: z.output<(typeof eventFilters)[K]> };

function eventQuery(f: Filters): EventQuery {
  return {
    types: f.type,
    user: f.user,
    clientId: f.app ?? f.client,
    grantId: f.grant,
    since: f.since === undefined ? undefined : new Date(f.since),
    until: f.until === undefined ? undefined : new Date(f.until),
  };
}

const consistent = [
  (f: Filters) => f.app === undefined || f.client === undefined || f.app === f.client,
  { message: 'give app or client, not two different ones', path: ['app'] as PropertyKey[] },
] as const;
const inOrder = [
  (f: Filters) => f.since === undefined || f.until === undefined || Date.parse(f.since) < Date.parse(f.until),
  { message: 'since must be before until', path: ['since'] as PropertyKey[] },
] as const;

const POSITION = /^(\d{1,20}):(\d{1,19})$/;

export function adminEventRoutes(app: AdminApp, deps: Deps): void {
  // A tail waiting for events answers at once when the admin API closes, so that closing never waits for it.
  const closing = new AbortController();
  app.addHook('preClose', (done) => {
    closing.abort();
    done();
  });
  const noUser = (user: string | undefined) => notFound(`no user ${user}: name a deleted user by their user_id`);

  app.get(
    '/admin/events',
    {
      schema: {
        tags,
        summary: 'The event log: every change with who made it, oldest first, a page at a time; events of deleted users and apps included',
        querystring: z
          .object({
            ...pageQuery,
            ...eventFilters,
            after: z
              .string()
              .regex(/^[1-9]\d{0,18}$/, 'an event_id')
              .optional()
              .describe('the last event_id of the previous page'),
          })
          .refine(...consistent)
          .refine(...inOrder),
        response: { 200: page(eventView), ...problems },
      },
    },
    async (request) => {
      const { after, limit, ...filters } = request.query;
      const result = await findEvents(deps.db, eventQuery(filters), { after, limit });
      if (result.kind === 'unknown_user') throw noUser(filters.user);
      return { items: result.events, next_after: nextAfter(result.events, limit, (e) => e.event_id) };
    },
  );

  app.get(
    '/admin/events/tail',
    {
      schema: {
        tags,
        summary:
          'Live events (a long poll): those committed after `position` (from now without one), in committed order, as soon as there are some or after `wait` seconds; ask again with the position answered',
        querystring: z
          .object({
            ...pageQuery,
            ...eventFilters,
            position: z.string().regex(POSITION, 'a position this route answered').optional().describe('the position of the previous answer'),
            wait: z.coerce
              .number()
              .int()
              .min(0)
              .max(MAX_TAIL_WAIT_SECONDS)
              .default(20)
              .describe(`seconds to wait for an event, at most ${MAX_TAIL_WAIT_SECONDS}`),
          })
          .refine(...consistent)
          .refine(...inOrder),
        response: { 200: z.object({ items: z.array(eventView), position: z.string().describe('pass as `position` to go on') }), ...problems },
      },
    },
    async (request, reply) => {
      const { position, wait, limit, ...filters } = request.query;
      // Ends the wait when the caller goes away (the CLI stopped) or the admin API closes.
      const gone = new AbortController();
      reply.raw.once('close', () => gone.abort());
      const at = position === undefined ? null : POSITION.exec(position)!;
      const result = await tailEventLog(deps.db, eventQuery(filters), {
        position: at === null ? null : { transactionId: at[1]!, eventId: at[2]! },
        limit,
        waitSeconds: wait,
        signal: AbortSignal.any([gone.signal, closing.signal]),
      });
      if (result.kind === 'unknown_user') throw noUser(filters.user);
      // Closing: the connection goes with this answer, or a keep-alive client would hold the close open.
      if (closing.signal.aborted) reply.header('Connection', 'close');
      return { items: result.events, position: `${result.position.transactionId}:${result.position.eventId}` };
    },
  );
}
