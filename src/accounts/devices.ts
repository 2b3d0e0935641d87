import type { ClientKind } from '../db/schema.js';
import type { Deps } from '../deps.js';
import type { Place } from '../geo/locate.js';
import { revokeAndCountGrants } from '../oauth/grant-revocation.js';
import { findClient } from '../repositories/clients.js';
import { findGrantOfUser, listAppsWithLiveGrants, listLiveGrantsOfUser } from '../repositories/grants.js';
import { listApprovedAwaitingDevice } from '../repositories/device-requests.js';
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

/** Approved, but the device has not yet picked up its tokens. */
export interface WaitingDeviceView {
  appName: string;
  platformName: string | null;
  approvedAt: Date;
}

export interface DevicesPage {
  devices: DeviceView[];
  waiting: WaitingDeviceView[];
  /** The app just signed out, when the address says so truthfully. */
  signedOutApp: string | null;
}

export interface ConnectedAppsPage {
  apps: ConnectedAppView[];
  /** The app whose access was just removed, while that is still true. */
  removedApp: string | null;
}

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
    collectedFromElsewhere:
      row.redeemer_action === 'warn' && row.redeemer_signals?.includes('redeemer_mismatch') ? placeOf(deps, row.redeemer_ip) : null,
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
  const byName = (a: ConnectedAppView, b: ConnectedAppView) =>
    a.appName === b.appName ? (a.clientId < b.clientId ? -1 : 1) : a.appName < b.appName ? -1 : 1;
  return [...apps, ...consentOnly].sort(byName);
}

/**
 * The Devices page. `signedOut` comes from the address after a sign-out: the page names the app
 * only if that grant is the user's and was signed out by them, so a crafted grant cannot make the
 * page claim anything untrue.
 */
export async function devicesPage(deps: Deps, userId: string, shown: { signedOut?: string | undefined }): Promise<DevicesPage> {
  const [devices, waiting, grant] = await Promise.all([
    listDevices(deps, userId),
    listApprovedAwaitingDevice(deps.db, userId, DEVICE_KINDS, deps.clock.now()),
    shown.signedOut === undefined ? undefined : findGrantOfUser(deps.db, userId, shown.signedOut),
  ]);
  return {
    devices,
    waiting: waiting.map((row) => ({ appName: row.client_name, platformName: row.platform_name, approvedAt: row.decided_at ?? deps.clock.now() })),
    signedOutApp: grant?.revoked_reason === 'signed_out_by_user' ? grant.client_name : null,
  };
}

/** The Connected apps page. `removed` comes from the address; it is named only while that is true. */
export async function connectedAppsPage(deps: Deps, userId: string, shown: { removed?: string | undefined }): Promise<ConnectedAppsPage> {
  const removed = shown.removed;
  const [apps, client] = await Promise.all([
    listConnectedApps(deps, userId),
    removed === undefined ? undefined : findClient(deps.db, removed),
  ]);
  const stillConnected = apps.some((app) => app.clientId === removed);
  return { apps, removedApp: client && !stillConnected ? client.name : null };
}

export type SignOutOutcome = 'signed_out' | 'not_found';

/**
 * Signs one device out: its grant is revoked, so its refresh token and access tokens stop on
 * their next use. Only a live grant of this user: another user's grant id changes nothing.
 */
export async function signOutDevice(deps: Deps, userId: string, grantId: string, ip: string | null): Promise<SignOutOutcome> {
  const revoked = await revokeAndCountGrants(deps, { userId, grantId }, 'signed_out_by_user', ip);
  return revoked.length > 0 ? 'signed_out' : 'not_found';
}

export type RemoveAccessOutcome = 'removed' | 'not_found';

/** Revokes every grant of one app for this user (devices and web alike) and forgets their consent; other users keep theirs. */
export async function removeAppAccess(deps: Deps, userId: string, clientId: string, ip: string | null): Promise<RemoveAccessOutcome> {
  const revoked = await revokeAndCountGrants(deps, { userId, clientId }, 'access_removed', ip);
  // After the tokens: the consent is what would let the app sign the user in again without asking.
  const forgotten = await forgetConsent(deps.db, userId, clientId);
  return revoked.length > 0 || forgotten ? 'removed' : 'not_found';
}
