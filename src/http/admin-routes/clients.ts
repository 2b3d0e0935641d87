import { z } from 'zod';
import type { Deps } from '../../deps.js';
import {
  changeClient,
  clientChangesSchema,
  clientPage,
  createClient,
  deleteClient,
  MAX_SECRET_GRACE_SECONDS,
  newClientSchema,
  rotateClientSecret,
  setClientDisabled,
  showClient,
} from '../../apps/registration.js';
import { adminActor, type AdminApp } from './types.js';
import { CLIENT_ID_SYNTAX } from '../../oauth/client-auth.js';
import { conflict, notFound } from './problem.js';
import { clientIdParam, clientState, clientView, createdClient, deleted, nextAfter, page, pageQuery, problems, rotatedSecret } from './schemas.js';

const tags = ['clients'];
const noClient = (clientId: string) => notFound(`no client ${clientId}: see GET /admin/clients`);

export function adminClientRoutes(app: AdminApp, deps: Deps): void {
  app.get(
    '/admin/clients',
    {
      schema: {
        tags,
        summary: 'Clients in client_id order, a page at a time',
        querystring: z.object({
          ...pageQuery,
          after: z.string().regex(CLIENT_ID_SYNTAX, 'not a client id').optional().describe('the last client_id of the previous page'),
        }),
        response: { 200: page(clientView), ...problems },
      },
    },
    async (request) => {
      const items = await clientPage(deps.db, request.query);
      return { items, next_after: nextAfter(items, request.query.limit, (c) => c.client_id) };
    },
  );

  app.post(
    '/admin/clients',
    {
      schema: {
        tags,
        summary: 'Register a client; a confidential one gets a secret, shown once',
        body: newClientSchema,
        response: { 201: createdClient, ...problems },
      },
    },
    async (request, reply) => {
      const created = await createClient(deps.db, request.body, { actor: adminActor(request), now: deps.clock.now() });
      request.audit = {
        action: 'client.create',
        target: created.client_id,
        details: { name: request.body.name, kind: request.body.kind, type: request.body.type },
      };
      return reply.code(201).send(created);
    },
  );

  app.get(
    '/admin/clients/:clientId',
    { schema: { tags, summary: 'One client (never its secret)', params: clientIdParam, response: { 200: clientView, ...problems } } },
    async (request) => (await showClient(deps.db, request.params.clientId)) ?? Promise.reject(noClient(request.params.clientId)),
  );

  app.patch(
    '/admin/clients/:clientId',
    {
      schema: {
        tags,
        summary: 'Change name, scopes or the introspection permission; every instance applies it at its next request',
        params: clientIdParam,
        body: clientChangesSchema,
        response: { 200: clientView, ...problems },
      },
    },
    async (request) => {
      const { clientId } = request.params;
      const outcome = await changeClient(deps.db, clientId, request.body, { actor: adminActor(request), now: deps.clock.now() });
      if (outcome.kind === 'not_found') throw noClient(clientId);
      if (outcome.kind === 'refused') throw conflict('not-a-resource-server', outcome.reason);
      request.audit = { action: 'client.update', target: clientId, details: request.body };
      return outcome.client;
    },
  );

  for (const action of ['disable', 'enable'] as const) {
    app.post(
      `/admin/clients/:clientId/${action}`,
      {
        schema: {
          tags,
          summary: action === 'disable' ? 'Refuse the app on every path from its next request' : 'Let a disabled app in again',
          params: clientIdParam,
          response: { 200: clientState, ...problems },
        },
      },
      async (request) => {
        const { clientId } = request.params;
        if (!(await setClientDisabled(deps.db, clientId, action === 'disable', deps.clock.now(), adminActor(request)))) throw noClient(clientId);
        request.audit = { action: `client.${action}`, target: clientId };
        return { client_id: clientId, disabled: action === 'disable' };
      },
    );
  }

  app.post(
    '/admin/clients/:clientId/secret',
    {
      schema: {
        tags,
        summary: "Rotate a confidential client's secret; the new one is shown once",
        params: clientIdParam,
        body: z
          .object({
            grace_period_seconds: z
              .number()
              .int()
              .min(0)
              .max(MAX_SECRET_GRACE_SECONDS)
              .default(0)
              .describe('how long the replaced secret keeps working; 0 (default) stops it at once'),
          })
          .strict()
          .nullish()
          .describe('optional: no body rotates with no grace period'),
        response: { 200: rotatedSecret, ...problems },
      },
    },
    async (request) => {
      const { clientId } = request.params;
      const grace = request.body?.grace_period_seconds ?? 0;
      const rotation = await rotateClientSecret(deps.db, clientId, grace, deps.clock.now(), adminActor(request));
      if (rotation.kind === 'not_found') throw noClient(clientId);
      if (rotation.kind === 'public_client') throw conflict('public-client', `${clientId} is a public client: it has no secret to rotate`);
      request.audit = { action: 'client.rotate_secret', target: clientId, details: { grace_period_seconds: grace } };
      const { kind: _kind, ...shown } = rotation;
      return shown;
    },
  );

  app.delete(
    '/admin/clients/:clientId',
    {
      schema: {
        tags,
        summary:
          "Delete the app with every grant, token and pending request it has (each grant's revocation recorded); its events stay for EVENT_RETENTION_DAYS",
        params: clientIdParam,
        response: { 200: deleted, ...problems },
      },
    },
    async (request) => {
      const { clientId } = request.params;
      if (!(await deleteClient(deps, clientId, adminActor(request)))) throw noClient(clientId);
      request.audit = { action: 'client.delete', target: clientId };
      return { deleted: true as const };
    },
  );
}
