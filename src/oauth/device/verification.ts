import type { Deps } from '../../deps.js';
import type { ClientKind } from '../../db/schema.js';
import { approveDeviceRequest, denyDeviceRequest, findDeviceRequestByUserCode } from '../../repositories/device-requests.js';
import { safeEqual } from '../../lib/random.js';
import { SCOPE_DESCRIPTIONS } from '../scopes.js';
import { iconPath } from './platform-icons.js';
import { normaliseUserCode, requestHandle, userCodeHmac } from './user-code.js';

/** Which verification page the user is on: bots have their own (/activate/bot). */
export type ActivationPage = 'device' | 'bot';

export function activationPageFor(kind: ClientKind): ActivationPage {
  return kind === 'bot' ? 'bot' : 'device';
}

/** What the approval page shows: plain values, never rows. */
export interface PendingRequestView {
  /** Names the request in the approval form: unguessable, unlike its id (see requestHandle). */
  handle: string;
  userCode: string;
  appName: string;
  appKind: ClientKind;
  scopes: { name: string; description: string }[];
  platformName: string | null;
  platformDescription: string | null;
  /** The icon's path on our own origin once the server has stored it; null until then, or when the fetch failed. */
  platformIcon: string | null;
  phraseChoices: string[];
}

export type CodeLookup =
  | { kind: 'malformed' }
  | { kind: 'unknown' }
  | { kind: 'expired' }
  | { kind: 'already_used' }
  | { kind: 'wrong_page'; rightPage: ActivationPage; userCode: string }
  | { kind: 'pending'; request: PendingRequestView };

type FoundRequest = NonNullable<Awaited<ReturnType<typeof findDeviceRequestByUserCode>>>;

/** The request a well-formed code names, while its app is enabled. */
async function findByUserCode(deps: Deps, userCode: string): Promise<FoundRequest | undefined> {
  const row = await findDeviceRequestByUserCode(deps.db, userCodeHmac(deps.secrets.userCodeKey, userCode));
  return row && row.client_disabled_at === null ? row : undefined;
}

/** What the user on `page` may do with the request a code names. */
function classify(deps: Deps, row: FoundRequest, userCode: string, page: ActivationPage): CodeLookup {
  if (row.status !== 'pending') return { kind: 'already_used' };
  if (row.expires_at <= deps.clock.now()) return { kind: 'expired' };
  const rightPage = activationPageFor(row.client_kind);
  if (rightPage !== page) return { kind: 'wrong_page', rightPage, userCode };
  return {
    kind: 'pending',
    request: {
      handle: requestHandle(deps.secrets.userCodeKey, row.request_id),
      userCode,
      appName: row.client_name,
      appKind: row.client_kind,
      scopes: row.scopes.map((name) => ({ name, description: SCOPE_DESCRIPTIONS[name] ?? name })),
      platformName: row.platform_name,
      platformDescription: row.platform_description,
      platformIcon: row.platform_icon_sha256 === null ? null : iconPath(row.platform_icon_sha256),
      phraseChoices: row.phrase_choices,
    },
  };
}

/** Finds the request a typed code names, as the user on `page` may act on it. */
export async function lookUpUserCode(deps: Deps, typed: string, page: ActivationPage): Promise<CodeLookup> {
  const userCode = normaliseUserCode(typed);
  if (!userCode) return { kind: 'malformed' };
  const row = await findByUserCode(deps, userCode);
  return row ? classify(deps, row, userCode, page) : { kind: 'unknown' };
}

export type Decision = 'approved' | 'cancelled_wrong_phrase' | 'denied' | 'already_decided';

/**
 * RFC 8628 §5.4 (remote phishing): the user proves they are looking at the device by picking
 * the phrase it shows. A wrong pick cancels the request for good.
 */
export async function approveWithPhrase(
  deps: Deps,
  requestId: string,
  user: { userId: string; authTime: Date },
  pickedPhrase: string,
): Promise<Decision> {
  const status = await approveDeviceRequest(deps.db, requestId, { ...user, pickedPhrase }, deps.clock.now());
  if (status === 'approved') return 'approved';
  if (status === 'denied') return 'cancelled_wrong_phrase';
  return 'already_decided';
}

export async function denyRequest(deps: Deps, requestId: string, userId: string): Promise<Decision> {
  return (await denyDeviceRequest(deps.db, requestId, userId, deps.clock.now())) ? 'denied' : 'already_decided';
}

export type RefusedCode = Exclude<CodeLookup, { kind: 'pending' }>;

export type DecisionChoice = { action: 'approve'; phrase: string } | { action: 'deny' };

export type DecisionOutcome = { kind: 'decided'; decision: Decision } | { kind: 'refused'; refusal: RefusedCode };

/**
 * The decision on the request the user saw on the approval page. Everything is checked again
 * (code, page, expiry, and that the code still names the request that was shown), and the
 * conditional UPDATE has the last word: a form resubmitted from history or a second tab
 * changes nothing. Requests are named by the user code and the handle shown with it: a handle
 * that does not belong to the code is answered exactly as an unknown code, so the decision form
 * tells a guesser no more than the code step does.
 */
export async function decideShownRequest(
  deps: Deps,
  page: ActivationPage,
  shown: { userCode: string; handle: string },
  user: { userId: string; authTime: Date },
  choice: DecisionChoice,
): Promise<DecisionOutcome> {
  const userCode = normaliseUserCode(shown.userCode);
  if (!userCode) return { kind: 'refused', refusal: { kind: 'malformed' } };
  const row = await findByUserCode(deps, userCode);
  if (!row || !safeEqual(requestHandle(deps.secrets.userCodeKey, row.request_id), shown.handle)) {
    return { kind: 'refused', refusal: { kind: 'unknown' } };
  }
  const lookup = classify(deps, row, userCode, page);
  // Only someone shown this request's approval page knows its handle: a second tab, history.
  if (lookup.kind === 'already_used') return { kind: 'decided', decision: 'already_decided' };
  if (lookup.kind !== 'pending') return { kind: 'refused', refusal: lookup };
  const decision =
    choice.action === 'approve'
      ? await approveWithPhrase(deps, row.request_id, user, choice.phrase)
      : await denyRequest(deps, row.request_id, user.userId);
  if (decision !== 'already_decided') deps.metrics.verificationDecisions.inc({ decision });
  return { kind: 'decided', decision };
}
