import { z } from 'zod';
import type { Deps } from '../../deps.js';
import { EVENT_TYPES, isEventType } from '../../events/vocabulary.js';
import { storedText } from '../../lib/stored-text.js';
import {
  addWebhook,
  findWebhookView,
  listWebhookViews,
  removeWebhook,
  replayWebhook,
  setWebhookPaused,
  WEBHOOK_ID_SYNTAX,
  webhookAttempts,
} from '../../webhooks/registration.js';
import { invalidInput, notFound } from './problem.js';
import { deleted, nextAfter, page, pageQuery, problems } from './schemas.js';
import { type AdminApp, adminActor } from './types.js';

const tags = ['webhooks'];

/** Types a webhook may take at most: the vocabulary holds fewer. */
const MAX_TYPES = 100;

const webhookView = z.object({
  id: z.string(),
  url: z.string(),
  events: z.array(z.string()).nullable().describe('the event types it is sent; null: every type'),
  status: z.enum(['active', 'paused']),
  paused_reason: z.enum(['operator', 'failing']).nullable().describe('paused by the operator, or because it kept failing for EVENTS_PAUSE_AFTER_HOURS'),
  paused_at: z.string().nullable(),
  failing_since: z.string().nullable().describe('when its current run of failed attempts began; null when the last attempt succeeded'),
  pending: z.number().describe('messages waiting for it (held while paused)'),
  created_at: z.string(),
});

const attemptView = z.object({
  attempt_id: z.string(),
  message_id: z.string().describe('the webhook-id header: the same on every attempt of one message'),
  event_id: z.string().nullable(),
  attempted_at: z.string(),
  http_status: z.number().nullable().describe("the receiver's status; null when no answer came (see error)"),
  error: z
    .string()
    .nullable()
    .describe(
      'why no status came back: not_public, not_resolved, not_https, timeout, connection_failed; event_purged: given up without a request, its event was purged',
    ),
  duration_ms: z.number(),
  message_state: z.enum(['delivered', 'gave_up', 'pending']),
});

const idParam = z.object({ id: z.string().regex(WEBHOOK_ID_SYNTAX, 'not a webhook id (wh_…)') });
const noWebhook = (id: string) => notFound(`no webhook ${id}: see GET /admin/webhooks`);

export function adminWebhookRoutes(app: AdminApp, deps: Deps): void {
  app.post(
    '/admin/webhooks',
    {
      schema: {
        tags,
        summary:
          'Register a webhook endpoint: https on a public address (loopback, over http too, only with EVENTS_ALLOW_LOOPBACK). Its signing secret (Standard Webhooks, whsec_…) is shown this once',
        body: z
          .object({
            url: storedText.min(1).max(2000).describe('where events are POSTed'),
            events: z
              .array(storedText.max(100).refine(isEventType, 'not an event type (docs/webhooks.md lists them)'))
              .min(1, 'give at least one type, or leave events out for every type')
              .max(MAX_TYPES)
              .optional()
              .describe(`the event types it is sent; left out: every type. One of ${EVENT_TYPES.join(', ')}`),
          })
          .strict(),
        response: { 201: z.object({ id: z.string(), secret: z.string().describe('shown once: the server keeps it sealed') }), ...problems },
      },
    },
    async (request, reply) => {
      const outcome = await addWebhook(deps, request.body, adminActor(request));
      if (!outcome.ok) throw invalidInput(`body.url: ${outcome.problem}`, [{ path: 'body.url', message: outcome.problem }]);
      request.audit = { action: 'webhooks.add', target: outcome.id, details: { events: request.body.events ?? 'all' } };
      return reply.code(201).send({ id: outcome.id, secret: outcome.secret });
    },
  );

  app.get(
    '/admin/webhooks',
    {
      schema: {
        tags,
        summary: 'The webhook endpoints with their state and backlog, never their secrets, in id order',
        querystring: z.object({
          ...pageQuery,
          after: z.string().regex(WEBHOOK_ID_SYNTAX, 'a webhook id').optional().describe('the last id of the previous page'),
        }),
        response: { 200: page(webhookView), ...problems },
      },
    },
    async (request) => {
      const { after, limit } = request.query;
      const items = await listWebhookViews(deps, { after, limit });
      return { items, next_after: nextAfter(items, limit, (w) => w.id) };
    },
  );

  app.get(
    '/admin/webhooks/:id',
    { schema: { tags, summary: 'One webhook endpoint, never its secret', params: idParam, response: { 200: webhookView, ...problems } } },
    async (request) => {
      const found = await findWebhookView(deps, request.params.id);
      if (!found) throw noWebhook(request.params.id);
      return found;
    },
  );

  for (const [action, paused] of [
    ['pause', true],
    ['resume', false],
  ] as const) {
    app.post(
      `/admin/webhooks/:id/${action}`,
      {
        schema: {
          tags,
          summary: paused
            ? 'Pause: nothing is sent, everything queued and everything new is kept'
            : 'Resume (also an endpoint paused for failing): its backlog is sent at once, in order',
          params: idParam,
          response: { 200: webhookView, ...problems },
        },
      },
      async (request) => {
        const changed = await setWebhookPaused(deps, request.params.id, paused, adminActor(request));
        if (!changed) throw noWebhook(request.params.id);
        if (!paused) deps.deliveries.poke();
        request.audit = { action: `webhooks.${action}`, target: request.params.id };
        return changed;
      },
    );
  }

  app.delete(
    '/admin/webhooks/:id',
    {
      schema: { tags, summary: 'Remove an endpoint with its backlog and delivery log', params: idParam, response: { 200: deleted, ...problems } },
    },
    async (request) => {
      if (!(await removeWebhook(deps, request.params.id, adminActor(request)))) throw noWebhook(request.params.id);
      request.audit = { action: 'webhooks.remove', target: request.params.id };
      return { deleted: true as const };
    },
  );

  app.get(
    '/admin/webhooks/:id/deliveries',
    {
      schema: {
        tags,
        summary: "The endpoint's delivery log: one row per attempt with its HTTP status, oldest first",
        params: idParam,
        querystring: z.object({
          ...pageQuery,
          after: z
            .string()
            .regex(/^[1-9]\d{0,18}$/, 'an attempt_id')
            .optional()
            .describe('the last attempt_id of the previous page'),
        }),
        response: { 200: page(attemptView), ...problems },
      },
    },
    async (request) => {
      const { after, limit } = request.query;
      const items = await webhookAttempts(deps, request.params.id, { after, limit });
      if (!items) throw noWebhook(request.params.id);
      return { items, next_after: nextAfter(items, limit, (a) => a.attempt_id) };
    },
  );

  app.post(
    '/admin/webhooks/:id/replay',
    {
      schema: {
        tags,
        summary:
          'Send again every event from a time on that the endpoint takes, in order (at most 10,000 per call; when not complete, replay again from last_event_at). An event sent before keeps its webhook-id',
        params: idParam,
        body: z.object({ since: z.iso.datetime({ offset: true }).describe('ISO 8601') }).strict(),
        response: {
          200: z.object({ queued: z.number(), last_event_at: z.string().nullable(), complete: z.boolean() }),
          ...problems,
        },
      },
    },
    async (request) => {
      const replayed = await replayWebhook(deps, request.params.id, new Date(request.body.since), adminActor(request));
      if (!replayed) throw noWebhook(request.params.id);
      deps.deliveries.poke();
      request.audit = { action: 'webhooks.replay', target: request.params.id, details: { since: request.body.since, queued: replayed.queued } };
      return replayed;
    },
  );
}
