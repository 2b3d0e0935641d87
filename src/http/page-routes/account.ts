import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { Deps } from '../../deps.js';
import {
  cancelWaitingDevice,
  connectedAppsPage,
  devicesPage,
  removeAppAccess,
  signOutDevice,
  type ConnectedAppsPage,
  type DevicesPage,
} from '../../accounts/devices.js';
import { CLIENT_ID_SYNTAX } from '../../oauth/client-auth.js';
import { parsePageForm } from '../form.js';
import { renderPage } from './render.js';
import type { MessageKey } from '../../i18n/catalogues.js';
import { translatorFor } from '../page-language.js';
import { signInUrl } from './sign-in.js';

const DEVICES_PATH = '/account/devices';
const APPS_PATH = '/account/apps';

const clientId = z.string().regex(CLIENT_ID_SYNTAX, 'not a client_id');

// A notice parameter that is not well formed is ignored: it only ever adds a line of text.
/** A device request's id: a PostgreSQL bigint, so one past its range is refused here rather than by the database. */
const requestId = z.string().refine((id) => /^[1-9][0-9]{0,18}$/.test(id) && BigInt(id) <= 9_223_372_036_854_775_807n, 'not a request id');

const devicesQuery = z.object({ signed_out: z.uuid().optional().catch(undefined), cancelled: requestId.optional().catch(undefined) });
const appsQuery = z.object({ removed: clientId.optional().catch(undefined) });
const signOutForm = z.object({ grant_id: z.uuid() });
const cancelForm = z.object({ request_id: requestId });
const removeForm = z.object({ client_id: clientId });

function renderDevices(deps: Deps, request: FastifyRequest, reply: FastifyReply, page: DevicesPage, message: MessageKey | null = null, status = 200) {
  const i18n = translatorFor(request);
  const notice =
    page.signedOutApp !== null
      ? i18n.t('devices.signed_out', { app: page.signedOutApp })
      : page.cancelledApp !== null
        ? i18n.t('devices.waiting_cancelled', { app: page.cancelledApp })
        : null;
  return renderPage(
    request,
    reply,
    'account/devices.eta',
    {
      title: i18n.t('devices.title'),
      ...page,
      notice,
      message: message && i18n.t(message),
      wayBack: DEVICES_PATH,
      now: deps.clock.now(),
      // Each device's row says where it signed in from: the footer credits the data (CC BY 4.0).
      usesLocationData: page.devices.length > 0,
    },
    status,
  );
}

function renderApps(deps: Deps, request: FastifyRequest, reply: FastifyReply, page: ConnectedAppsPage, message: MessageKey | null = null, status = 200) {
  const i18n = translatorFor(request);
  const notice = page.removedApp === null ? null : i18n.t('apps.removed', { app: page.removedApp });
  return renderPage(
    request,
    reply,
    'account/apps.eta',
    { title: i18n.t('apps.title'), ...page, notice, message: message && i18n.t(message), wayBack: APPS_PATH, now: deps.clock.now() },
    status,
  );
}

export function accountRoutes(app: FastifyInstance, deps: Deps): void {
  app.get(DEVICES_PATH, async (request, reply) => {
    const user = request.session?.user;
    if (!user) return reply.redirect(signInUrl(DEVICES_PATH), 303);
    const query = parsePageForm(devicesQuery, request.query);
    return renderDevices(deps, request, reply, await devicesPage(deps, user.userId, { signedOut: query.signed_out, cancelled: query.cancelled }));
  });

  app.post(`${DEVICES_PATH}/sign-out`, async (request, reply) => {
    const user = request.session?.user;
    if (!user) return reply.redirect(signInUrl(DEVICES_PATH), 303);
    const form = parsePageForm(signOutForm, request.body);
    const outcome = await signOutDevice(deps, user.userId, form.grant_id, request.ip);
    if (outcome === 'signed_out') return reply.redirect(`${DEVICES_PATH}?signed_out=${form.grant_id}`, 303);
    return renderDevices(deps, request, reply, await devicesPage(deps, user.userId, {}), 'devices.not_found', 404);
  });

  // Issue 27 §5: an approval the device has not yet picked up can be taken back.
  app.post(`${DEVICES_PATH}/cancel`, async (request, reply) => {
    const user = request.session?.user;
    if (!user) return reply.redirect(signInUrl(DEVICES_PATH), 303);
    const form = parsePageForm(cancelForm, request.body);
    const outcome = await cancelWaitingDevice(deps, user.userId, form.request_id, request.ip);
    if (outcome === 'cancelled') return reply.redirect(`${DEVICES_PATH}?cancelled=${form.request_id}`, 303);
    return renderDevices(deps, request, reply, await devicesPage(deps, user.userId, {}), 'devices.waiting_not_found', 404);
  });

  app.get(APPS_PATH, async (request, reply) => {
    const user = request.session?.user;
    if (!user) return reply.redirect(signInUrl(APPS_PATH), 303);
    const query = parsePageForm(appsQuery, request.query);
    return renderApps(deps, request, reply, await connectedAppsPage(deps, user.userId, { removed: query.removed }));
  });

  app.post(`${APPS_PATH}/remove`, async (request, reply) => {
    const user = request.session?.user;
    if (!user) return reply.redirect(signInUrl(APPS_PATH), 303);
    const form = parsePageForm(removeForm, request.body);
    const outcome = await removeAppAccess(deps, user.userId, form.client_id, request.ip);
    if (outcome === 'removed') return reply.redirect(`${APPS_PATH}?removed=${encodeURIComponent(form.client_id)}`, 303);
    return renderApps(deps, request, reply, await connectedAppsPage(deps, user.userId, {}), 'apps.not_found', 404);
  });
}
