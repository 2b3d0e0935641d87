import { z } from 'zod';
import type { Deps } from '../../deps.js';
import { banUserAndCount, unbanUser } from '../../accounts/bans.js';
import { listConnectedApps, listDevices, removeAppAccess, signOutDevice } from '../../accounts/devices.js';
import {
  changePassword,
  changeUser,
  deleteUser,
  newPasswordSchema,
  newUserSchema,
  normaliseEmail,
  registerUser,
  showUser,
  userChangesSchema,
  userPage,
  type UserView,
} from '../../accounts/users.js';
import { storedText } from '../../lib/stored-text.js';
import { adminActor, type AdminApp } from './types.js';
import { conflict, notFound } from './problem.js';
import { connectedAppView, deleted, deviceView, emailParam, emailText, nextAfter, page, pageQuery, problems, userView } from './schemas.js';
import { CLIENT_ID_SYNTAX } from '../../oauth/client-auth.js';

const tags = ['users'];
const noUser = (email: string) => notFound(`no user ${normaliseEmail(email)}: see GET /admin/users?search=`);

/** Where a change made through the admin API is recorded as coming from in the grant's events. */
const ADMIN_ORIGIN = null;

export function adminUserRoutes(app: AdminApp, deps: Deps): void {
  const userOrThrow = async (email: string): Promise<UserView> => (await showUser(deps.db, email)) ?? Promise.reject(noUser(email));

  app.get(
    '/admin/users',
    {
      schema: {
        tags,
        summary: 'Users in email order, a page at a time; `search` matches email or name',
        querystring: z.object({
          ...pageQuery,
          after: emailText.optional().describe('the last email of the previous page'),
          search: storedText.max(254).optional().describe('case-insensitive; wildcards taken literally'),
        }),
        response: { 200: page(userView), ...problems },
      },
    },
    async (request) => {
      const items = await userPage(deps.db, request.query);
      return { items, next_after: nextAfter(items, request.query.limit, (u) => u.email) };
    },
  );

  app.post(
    '/admin/users',
    {
      schema: {
        tags,
        summary: 'Create a user (the password is stored with argon2id, never logged)',
        body: newUserSchema,
        response: { 201: z.object({ user_id: z.string() }), ...problems },
      },
    },
    async (request, reply) => {
      const registration = await registerUser(deps, request.body, adminActor(request));
      if (registration.kind === 'exists') {
        throw conflict('email-taken', `a user with this email exists: see GET /admin/users/${encodeURIComponent(registration.email)}`);
      }
      request.audit = { action: 'user.create', target: normaliseEmail(request.body.email), details: { user_id: registration.user_id } };
      return reply.code(201).send({ user_id: registration.user_id });
    },
  );

  app.get(
    '/admin/users/:email',
    { schema: { tags, summary: 'One user (never the password hash)', params: emailParam, response: { 200: userView, ...problems } } },
    async (request) => userOrThrow(request.params.email),
  );

  app.patch(
    '/admin/users/:email',
    {
      schema: {
        tags,
        summary: "Change a user's name (the event records which fields changed, never their values)",
        params: emailParam,
        body: userChangesSchema,
        response: { 200: userView, ...problems },
      },
    },
    async (request) => {
      const email = normaliseEmail(request.params.email);
      const result = await changeUser(deps, email, request.body, adminActor(request));
      if (!result) throw noUser(email);
      request.audit = { action: 'user.change', target: email, details: { fields: Object.keys(request.body) } };
      return userOrThrow(email);
    },
  );

  app.put(
    '/admin/users/:email/password',
    {
      schema: {
        tags,
        summary: "Set a user's password (argon2id, never logged): their browser sessions end, their devices and apps stay signed in",
        params: emailParam,
        body: newPasswordSchema,
        response: { 200: z.object({ user_id: z.string(), sessions_ended: z.number().int() }), ...problems },
      },
    },
    async (request) => {
      const email = normaliseEmail(request.params.email);
      const result = await changePassword(deps, email, request.body.password, adminActor(request));
      if (!result) throw noUser(email);
      request.audit = { action: 'user.password', target: email, details: { sessions_ended: result.sessions_ended } };
      return result;
    },
  );

  app.post(
    '/admin/users/:email/ban',
    {
      schema: {
        tags,
        summary: 'Ban: every grant and session ends at once, sign-in is refused',
        params: emailParam,
        response: { 200: z.object({ user_id: z.string(), banned: z.literal(true), revoked_grants: z.number() }), ...problems },
      },
    },
    async (request) => {
      const email = normaliseEmail(request.params.email);
      const result = await banUserAndCount(deps, email, adminActor(request));
      if (!result) throw noUser(email);
      request.audit = { action: 'user.ban', target: email, details: { revoked_grants: result.revoked_grants } };
      return { ...result, banned: true as const };
    },
  );

  app.post(
    '/admin/users/:email/unban',
    {
      schema: {
        tags,
        summary: 'Lift a ban (old tokens stay revoked)',
        params: emailParam,
        response: { 200: z.object({ user_id: z.string(), banned: z.literal(false) }), ...problems },
      },
    },
    async (request) => {
      const email = normaliseEmail(request.params.email);
      const result = await unbanUser(deps.db, email, adminActor(request), deps.clock.now());
      if (!result) throw noUser(email);
      request.audit = { action: 'user.unban', target: email };
      return { ...result, banned: false as const };
    },
  );

  app.delete(
    '/admin/users/:email',
    {
      schema: {
        tags,
        summary:
          "Delete the user with their sessions, grants and tokens (each grant's revocation recorded); their events stay, by user_id, for EVENT_RETENTION_DAYS",
        params: emailParam,
        response: { 200: deleted, ...problems },
      },
    },
    async (request) => {
      const email = normaliseEmail(request.params.email);
      const result = await deleteUser(deps, email, adminActor(request));
      if (!result) throw noUser(email);
      request.audit = { action: 'user.delete', target: email, details: { user_id: result.user_id, revoked_grants: result.revoked_grants } };
      return { deleted: true as const };
    },
  );

  app.get(
    '/admin/users/:email/devices',
    {
      schema: {
        tags,
        summary: "The user's signed-in devices, as their Devices page lists them",
        params: emailParam,
        response: { 200: z.object({ items: z.array(deviceView) }), ...problems },
      },
    },
    async (request) => {
      const user = await userOrThrow(request.params.email);
      const devices = await listDevices(deps, user.user_id);
      return {
        items: devices.map((d) => ({
          grant_id: d.grantId,
          client_id: d.clientId,
          app: d.appName,
          platform_name: d.platformName,
          platform_description: d.platformDescription,
          signed_in_at: d.signedInAt.toISOString(),
          last_used_at: d.lastUsedAt.toISOString(),
        })),
      };
    },
  );

  app.delete(
    '/admin/users/:email/devices/:grantId',
    {
      schema: {
        tags,
        summary: "Sign one device out, as the user's Devices page does: its tokens stop at once",
        params: emailParam.extend({ grantId: z.uuid() }),
        response: { 200: z.object({ signed_out: z.literal(true) }), ...problems },
      },
    },
    async (request) => {
      const user = await userOrThrow(request.params.email);
      const outcome = await signOutDevice(deps, user.user_id, request.params.grantId, ADMIN_ORIGIN, adminActor(request));
      if (outcome === 'not_found') throw notFound(`no signed-in device ${request.params.grantId} of ${user.email}`);
      request.audit = { action: 'user.device.sign_out', target: user.email, details: { grant_id: request.params.grantId } };
      return { signed_out: true as const };
    },
  );

  app.get(
    '/admin/users/:email/apps',
    {
      schema: {
        tags,
        summary: "The apps with access to the user's account, as their Connected apps page lists them",
        params: emailParam,
        response: { 200: z.object({ items: z.array(connectedAppView) }), ...problems },
      },
    },
    async (request) => {
      const user = await userOrThrow(request.params.email);
      const apps = await listConnectedApps(deps, user.user_id);
      return {
        items: apps.map((a) => ({ client_id: a.clientId, app: a.appName, kind: a.appKind, devices: a.devices, last_used_at: a.lastUsedAt.toISOString() })),
      };
    },
  );

  app.delete(
    '/admin/users/:email/apps/:clientId',
    {
      schema: {
        tags,
        summary: "Remove an app's access, as the Connected apps page does: every grant of it ends",
        params: emailParam.extend({ clientId: z.string().regex(CLIENT_ID_SYNTAX, 'not a client id') }),
        response: { 200: z.object({ removed: z.literal(true) }), ...problems },
      },
    },
    async (request) => {
      const user = await userOrThrow(request.params.email);
      const outcome = await removeAppAccess(deps, user.user_id, request.params.clientId, ADMIN_ORIGIN, adminActor(request));
      if (outcome === 'not_found') throw notFound(`${request.params.clientId} has no access to ${user.email}'s account`);
      request.audit = { action: 'user.app.remove_access', target: user.email, details: { client_id: request.params.clientId } };
      return { removed: true as const };
    },
  );
}
