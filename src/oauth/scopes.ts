import { invalidScope } from './errors.js';

/** Scopes a user grants an app (the device and code flows); a client may be allowed a subset. */
export const SUPPORTED_SCOPES = ['openid', 'profile', 'email', 'offline_access'] as const;

/**
 * Scopes an app holds for itself, with no user (the client_credentials grant): managing its Shared
 * Signals streams, and reading them (the CAEP interoperability profile's names). Never part of a
 * user's grant: the user flows leave them out of what an app is allowed (userScopes).
 */
const APP_SCOPES = ['ssf.manage', 'ssf.read'] as const;

/** Every scope an app can be registered for. */
export const REGISTRABLE_SCOPES = [...SUPPORTED_SCOPES, ...APP_SCOPES] as const;

const APP_SCOPE_SET: ReadonlySet<string> = new Set(APP_SCOPES);

/** What a user may grant of what an app is allowed. */
export function userScopes(allowed: readonly string[]): string[] {
  return allowed.filter((scope) => !APP_SCOPE_SET.has(scope));
}

/** What an app may hold for itself of what it is allowed. */
export function appScopes(allowed: readonly string[]): string[] {
  return allowed.filter((scope) => APP_SCOPE_SET.has(scope));
}

/** RFC 6749 §3.3: space-delimited, case-sensitive; duplicates collapse. */
export function parseScope(scope: string | undefined): string[] | undefined {
  if (scope === undefined) return undefined;
  const scopes = scope.split(' ').filter((s) => s.length > 0);
  return [...new Set(scopes)];
}

export function formatScope(scopes: readonly string[]): string {
  return scopes.join(' ');
}

/** Requested scopes must all be allowed; none requested means all the client is allowed. */
export function grantableScopes(requested: string[] | undefined, allowed: readonly string[]): string[] {
  if (requested === undefined || requested.length === 0) return [...allowed];
  const refused = requested.filter((s) => !allowed.includes(s));
  if (refused.length > 0) throw invalidScope(`scope not allowed for this client: ${refused.join(' ')}`);
  return requested;
}

/** RFC 6749 §6: a refresh may narrow the granted scope, never widen it. */
export function narrowedScopes(requested: string[] | undefined, granted: readonly string[]): string[] {
  if (requested === undefined || requested.length === 0) return [...granted];
  const wider = requested.filter((s) => !granted.includes(s));
  if (wider.length > 0) throw invalidScope(`scope exceeds what was granted: ${wider.join(' ')}`);
  return requested;
}
