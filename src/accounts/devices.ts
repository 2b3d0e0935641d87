import type { ClientKind } from '../db/schema.js';
import type { Deps } from '../deps.js';
import type { Place } from '../geo/locate.js';
import { actorColumn, type Actor } from '../events/event-log.js';
import { revokeAndCountGrants, revokeGrants } from '../oauth/grant-revocation.js';
import { findClient } from '../repositories/clients.js';
import { findGrantOfUser, listAppsWithLiveGrants, listLiveGrantsOfUser } from '../repositories/grants.js';
import { cancelApprovedRequest, cancelApprovedRequestsOfApp, findRequestDeniedByUser, listApprovedAwaitingDevice } from '../repositories/device-requests.js';
import { forgetConsent, listConsentsOfUser } from '../repositories/consents.js';

/** A grant of a TV / device app or a bot is a device; a web app's grant is not, though it is a connected app. */
const DEVICE_KINDS: readonly ClientKind[] = ['tv', 'bot'];

export interface DeviceView {
  grantId: string;
  clientId: string;
  appName: string;
  appKind: ClientKind;
  /** What the device said about itself, never checked: shown marked Unverified. */
  platformName: string | null;
  platformDescription: string | null;
  signedInAt: Date;
  lastUsedAt: Date;
  /** Where the address it signed in from is, and that of its latest use; null when none was recorded. */
  signedInFrom: Place | null;
  lastUsedFrom: Place | null;
  /**
   * Where the tokens were collected from, when that was another country, AS or hosting class than
   * the request and the policy warns about it (issue 27 §3, PROXIMITY_POLICY_REDEEMER_MISMATCH); else null.
   */
  collectedFromElsewhere: Place | null;
  /** Completes the accessible name of the row's Sign out button. */
  label: string;
}

export interface ConnectedAppView {
  clientId: string;
  appName: string;
  appKind: ClientKind;
  /** How many of its grants the Devices page lists; null for a web app, whose grants are not devices. */
  devices: number | null;
  lastUsedAt: Date;
}

/** A row of the Connected apps page: it agrees with the Devices page, which lists approvals not yet picked up. */
export interface ConnectedAppRow extends Omit<ConnectedAppView, 'lastUsedAt'> {
  /** Approvals of it the Devices page lists as waiting for the device. */
  waiting: number;
  /** Null while its only tie to the account is an approval not yet picked up. */
  lastUsedAt: Date | null;
}

/** Approved, but the device has not yet picked up its tokens; it can still be cancelled. */
export interface WaitingDeviceView {
  requestId: string;
  appName: string;
  platformName: string | null;
  approvedAt: Date;
}

export interface DevicesPage {
  devices: DeviceView[];
  waiting: WaitingDeviceView[];
  /** The app just signed out, when the address says so truthfully. */
  signedOutApp: string | null;
  /** The app whose waiting approval was just cancelled, likewise. */
  cancelledApp: string | null;
}

export interface ConnectedAppsPage {
  apps: ConnectedAppRow[];
  /** The app whose access was just removed, while that is still true. */
  removedApp: string | null;
}

const byName = (a: { appName: string; clientId: string }, b: { appName: string; clientId: string }) =>
  a.appName === b.appName ? (a.clientId < b.clientId ? -1 : 1) : a.appName < b.appName ? -1 : 1;

const placeOf = (deps: Deps, address: string | null): Place | null => (address === null ? null : deps.geo.locate(address));

/** Every live grant of the user's TV / device apps and bots, most recently used first. */
export async function listDevices(deps: Deps, userId: string): Promise<DeviceView[]> {
  const rows = await listLiveGrantsOfUser(deps.db, userId, DEVICE_KINDS, deps.clock.now());
  return rows.map((row) => ({
    grantId: row.grant_id,
    clientId: row.client_id,
    appName: row.client_name,
    appKind: row.client_kind,
    platformName: row.platform_name,
    platformDescription: row.platform_description,
    signedInAt: row.created_at,
    lastUsedAt: row.last_used_at,
    signedInFrom: placeOf(deps, row.signed_in_ip),
    lastUsedFrom: placeOf(deps, row.last_used_ip),
    collectedFromElsewhere: row.redeemer_action === 'warn' && row.redeemer_signals?.includes('redeemer_mismatch') ? placeOf(deps, row.redeemer_ip) : null,
    label: row.platform_name === null ? row.client_name : `${row.client_name} (${row.platform_name})`,
  }));
}

/**
 * Every app, of any kind, with at least one live grant of the user, or the user's consent (a web
 * app keeps it after its tokens ended, and would sign the user in again without asking).
 */
export async function listConnectedApps(deps: Deps, userId: string): Promise<ConnectedAppView[]> {
  const [rows, consents] = await Promise.all([listAppsWithLiveGrants(deps.db, userId, deps.clock.now()), listConsentsOfUser(deps.db, userId)]);
  const apps: ConnectedAppView[] = rows.map((row) => ({
    clientId: row.client_id,
    appName: row.client_name,
    appKind: row.client_kind,
    devices: DEVICE_KINDS.includes(row.client_kind) ? row.live_grants : null,
    lastUsedAt: row.last_used_at,
  }));
  const listed = new Set(apps.map((app) => app.clientId));
  const consentOnly = consents
    .filter((consent) => !listed.has(consent.client_id))
    .map((consent) => ({
      clientId: consent.client_id,
      appName: consent.client_name,
      appKind: consent.client_kind,
      devices: DEVICE_KINDS.includes(consent.client_kind) ? 0 : null,
      lastUsedAt: consent.granted_at,
    }));
  if (consentOnly.length === 0) return apps;
  return [...apps, ...consentOnly].sort(byName);
}

/**
 * The Devices page. `signedOut` comes from the address after a sign-out: the page names the app
 * only if that grant is the user's and was signed out by them, so a crafted grant cannot make the
 * page claim anything untrue.
 */
export async function devicesPage(deps: Deps, userId: string, shown: { signedOut?: string | undefined; cancelled?: string | undefined }): Promise<DevicesPage> {
  const [devices, waiting, grant, cancelled] = await Promise.all([
    listDevices(deps, userId),
    listApprovedAwaitingDevice(deps.db, userId, DEVICE_KINDS, deps.clock.now()),
    shown.signedOut === undefined ? undefined : findGrantOfUser(deps.db, userId, shown.signedOut),
    shown.cancelled === undefined ? undefined : findRequestDeniedByUser(deps.db, userId, shown.cancelled),
  ]);
  return {
    devices,
    waiting: waiting.map((row) => ({
      requestId: row.request_id,
      appName: row.client_name,
      platformName: row.platform_name,
      approvedAt: row.decided_at ?? deps.clock.now(),
    })),
    signedOutApp: grant?.revoked_reason === 'signed_out_by_user' ? grant.client_name : null,
    cancelledApp: cancelled?.client_name ?? null,
  };
}

export type CancelOutcome = 'cancelled' | 'not_found';

/**
 * Takes back an approval the device has not yet picked up: its next poll hears access_denied and
 * no tokens are ever issued for it. Only this user's approval, only while still waiting: if the
 * device's poll got there first it is signed in, and the Devices page lists it to sign out.
 */
export async function cancelWaitingDevice(deps: Deps, userId: string, requestId: string, ip: string | null = null): Promise<CancelOutcome> {
  return (await cancelApprovedRequest(deps.db, userId, requestId, deps.clock.now(), ip)) ? 'cancelled' : 'not_found';
}

/** The Connected apps page. `removed` comes from the address; it is named only while that is true. */
export async function connectedAppsPage(deps: Deps, userId: string, shown: { removed?: string | undefined }): Promise<ConnectedAppsPage> {
  const removed = shown.removed;
  const [connected, waiting, client] = await Promise.all([
    listConnectedApps(deps, userId),
    listApprovedAwaitingDevice(deps.db, userId, DEVICE_KINDS, deps.clock.now()),
    removed === undefined ? undefined : findClient(deps.db, removed),
  ]);
  const waitingOf = (clientId: string) => waiting.filter((row) => row.client_id === clientId).length;
  const apps: ConnectedAppRow[] = connected.map((app) => ({ ...app, waiting: waitingOf(app.clientId) }));
  // An app whose only tie is an approval its device has not yet picked up is listed too.
  for (const row of waiting) {
    if (apps.some((app) => app.clientId === row.client_id)) continue;
    apps.push({ clientId: row.client_id, appName: row.client_name, appKind: row.client_kind, devices: 0, waiting: waitingOf(row.client_id), lastUsedAt: null });
  }
  apps.sort(byName);
  const stillConnected = apps.some((app) => app.clientId === removed);
  return { apps, removedApp: client && !stillConnected ? client.name : null };
}

export type SignOutOutcome = 'signed_out' | 'not_found';

/**
 * Signs one device out: its grant is revoked, so its refresh token and access tokens stop on
 * their next use. Only a live grant of this user: another user's grant id changes nothing.
 * `actor`: the operator, when the admin API signs the device out on the user's behalf.
 */
export async function signOutDevice(deps: Deps, userId: string, grantId: string, ip: string | null, actor: Actor | null = null): Promise<SignOutOutcome> {
  const revoked = await revokeAndCountGrants(deps, { userId, grantId }, 'signed_out_by_user', ip, actor);
  return revoked.length > 0 ? 'signed_out' : 'not_found';
}

export type RemoveAccessOutcome = 'removed' | 'not_found';

/**
 * Revokes every grant of one app for this user (devices and web alike), cancels its approvals not
 * yet picked up and forgets their consent; other users keep theirs. One transaction: the
 * cancellations' and revocations' events commit with them, or nothing does.
 */
export async function removeAppAccess(
  deps: Deps,
  userId: string,
  clientId: string,
  ip: string | null,
  actor: Actor | null = null,
): Promise<RemoveAccessOutcome> {
  const now = deps.clock.now();
  const outcome = await deps.db.transaction().execute(async (trx) => {
    // First: an approval redeemed before this statement has its grant committed by then, so the
    // revocation below (a statement of its own, with a newer snapshot) finds it; one redeemed after it is not possible.
    const cancelled = await cancelApprovedRequestsOfApp(trx, userId, clientId, { now, ip, actor: actorColumn(actor) });
    const revoked = await revokeGrants(trx, { userId, clientId }, 'access_removed', { now, ip, actor });
    // After the tokens: the consent is what would let the app sign the user in again without asking.
    const forgotten = await forgetConsent(trx, userId, clientId);
    return { revoked: revoked.length, removed: revoked.length > 0 || cancelled > 0 || forgotten };
  });
  deps.metrics.grantRevocations.inc({ reason: 'access_removed' }, outcome.revoked);
  return outcome.removed ? 'removed' : 'not_found';
}
