import type { Deps } from '../../deps.js';
import type { ClientKind } from '../../db/schema.js';
import { approveDeviceRequest, denyDeviceRequest, findDeviceRequestByUserCode } from '../../repositories/device-requests.js';
import { safeEqual } from '../../lib/random.js';
import { iconPath } from './platform-icons.js';
import { normaliseUserCode, requestHandle, userCodeHmac } from './user-code.js';
import { assessProximity, type ProximityAssessment } from './proximity.js';
import { countProximityOverrides, type DevicePolicy } from './policy.js';

/** Which verification page the user is on: bots have their own (/activate/bot). */
export type ActivationPage = 'device' | 'bot';

function activationPageFor(kind: ClientKind): ActivationPage {
  return kind === 'bot' ? 'bot' : 'device';
}

/** What the approval page shows: plain values, never rows. */
export interface PendingRequestView {
  /** Names the request in the approval form: unguessable, unlike its id (see requestHandle). */
  handle: string;
  userCode: string;
  appName: string;
  appKind: ClientKind;
  /** The approval page describes each in the reader's language (scope.<name> in the catalogues). */
  scopes: string[];
  platformName: string | null;
  platformDescription: string | null;
  /** The icon's path on our own origin once the server has stored it; null until then, or when the fetch failed. */
  platformIcon: string | null;
  /** The phrases to choose from; null when the app's devices show no phrase, so none is asked. */
  phraseChoices: string[] | null;
  /** When the code stops working (WCAG 2.2 SC 2.2.1: the page says how long is left). */
  expiresAt: Date;
  requestedAt: Date;
  /** Where the request came from compared with where the approver is, and what the policy asks. */
  proximity: ProximityAssessment;
}

export type CodeLookup =
  | { kind: 'malformed' }
  | { kind: 'unknown' }
  | { kind: 'expired' }
  | { kind: 'already_used' }
  /** Cancelled by a wrong phrase pick: not "used", and the user should know why. */
  | { kind: 'cancelled' }
  | { kind: 'denied' }
  | { kind: 'wrong_page'; rightPage: ActivationPage; userCode: string }
  /** The operator's policy refuses requests from where this one came from; it is now denied. */
  | { kind: 'refused_by_policy'; proximity: ProximityAssessment }
  | { kind: 'pending'; request: PendingRequestView };

type FoundRequest = NonNullable<Awaited<ReturnType<typeof findDeviceRequestByUserCode>>>;

/** The request a well-formed code names, while its app is enabled. */
async function findByUserCode(deps: Deps, userCode: string): Promise<FoundRequest | undefined> {
  const row = await findDeviceRequestByUserCode(deps.db, userCodeHmac(deps.secrets.userCodeKey, userCode));
  return row && row.client_disabled_at === null ? row : undefined;
}

/**
 * What the user on `page` may do with the request a code names, seen from `approverIp`, under
 * the device policy of the request's app (its proximity overrides, issue 31 §2).
 */
function classify(deps: Deps, row: FoundRequest, userCode: string, page: ActivationPage, approverIp: string, policy: DevicePolicy): CodeLookup {
  if (row.status === 'denied') return row.denied_reason === 'wrong_phrase' ? { kind: 'cancelled' } : { kind: 'denied' };
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
      scopes: row.scopes,
      platformName: row.platform_name,
      platformDescription: row.platform_description,
      platformIcon: row.platform_icon_sha256 === null ? null : iconPath(row.platform_icon_sha256),
      phraseChoices: row.phrase_choices,
      expiresAt: row.expires_at,
      requestedAt: row.created_at,
      proximity: assessProximity(deps.geo, row.requester_ip, approverIp, policy.proximity),
    },
  };
}

/** Finds the request a typed code names, as the user on `page` may act on it. */
export async function lookUpUserCode(deps: Deps, typed: string, page: ActivationPage, approver: { userId: string; ip: string }): Promise<CodeLookup> {
  const userCode = normaliseUserCode(typed);
  if (!userCode) return { kind: 'malformed' };
  const row = await findByUserCode(deps, userCode);
  if (!row) return { kind: 'unknown' };
  const policy = deps.devicePolicies.resolve(row.client_id);
  const lookup = classify(deps, row, userCode, page, approver.ip, policy);
  if (lookup.kind === 'pending' && lookup.request.proximity.action === 'deny') {
    // Refused before the user could approve it: the device hears access_denied.
    await refuseByPolicy(deps, row.request_id, approver, lookup.request.proximity, policy);
    return { kind: 'refused_by_policy', proximity: lookup.request.proximity };
  }
  return lookup;
}

/**
 * What a decision records of its context: both sides' places, the warnings shown, and whether the
 * user ticked "in front of me" (issue 31 §1: kept on the grant as its decision).
 */
function decisionContext(proximity: ProximityAssessment, confirmed = false): string {
  const { requester, approver, sameNetwork, sameProvider, signals, action } = proximity;
  return JSON.stringify({ requester, approver, same_network: sameNetwork, same_provider: sameProvider, signals, action, confirmed });
}

function countDecision(deps: Deps, decision: string, proximity: ProximityAssessment): void {
  for (const signal of proximity.signals.length > 0 ? proximity.signals : ['none']) deps.metrics.proximityDecisions.inc({ decision, signal });
}

async function refuseByPolicy(
  deps: Deps,
  requestId: string,
  approver: { userId: string; ip: string },
  proximity: ProximityAssessment,
  policy: DevicePolicy,
): Promise<void> {
  const denial = { userId: approver.userId, reason: 'policy' as const, context: decisionContext(proximity), ip: approver.ip };
  const refused = await denyDeviceRequest(deps.db, requestId, denial, deps.clock.now());
  if (!refused) return;
  countDecision(deps, 'refused_by_policy', proximity);
  countProximityOverrides(policy, proximity.signals);
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
  /** Null for a request whose device shows no phrase. */
  pickedPhrase: string | null,
  context: string | null = null,
  /** Stored with the approval: the redeeming poll and later refreshes are compared with it (proximity.ts). */
  approverIp: string | null = null,
): Promise<Decision> {
  const status = await approveDeviceRequest(deps.db, requestId, { ...user, pickedPhrase, context, approverIp }, deps.clock.now());
  if (status === 'approved') return 'approved';
  if (status === 'denied') return 'cancelled_wrong_phrase';
  return 'already_decided';
}

export async function denyRequest(deps: Deps, requestId: string, userId: string, context: string | null = null, ip: string | null = null): Promise<Decision> {
  return (await denyDeviceRequest(deps.db, requestId, { userId, reason: 'user_denied', context, ip }, deps.clock.now())) ? 'denied' : 'already_decided';
}

export type RefusedCode = Exclude<CodeLookup, { kind: 'pending' }>;

/**
 * `inFrontOfMe`: the extra step the policy may ask for ("I am setting up a device that is in front of me").
 * `phrase`: the one picked, null when none was (right only for a request whose device shows none).
 */
export type DecisionChoice = { action: 'approve'; phrase: string | null; inFrontOfMe: boolean } | { action: 'deny' };

export type DecisionOutcome =
  | { kind: 'decided'; decision: Decision; appName: string }
  | { kind: 'refused'; refusal: RefusedCode }
  /** Approve without the extra step the policy asks for here: nothing decided, the page again. */
  | { kind: 'needs_confirmation'; request: PendingRequestView }
  /** Approve without a phrase for a request whose device shows one: nothing decided. */
  | { kind: 'needs_phrase' };

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
  approverIp: string,
): Promise<DecisionOutcome> {
  const userCode = normaliseUserCode(shown.userCode);
  if (!userCode) return { kind: 'refused', refusal: { kind: 'malformed' } };
  const row = await findByUserCode(deps, userCode);
  if (!row || !safeEqual(requestHandle(deps.secrets.userCodeKey, row.request_id), shown.handle)) {
    return { kind: 'refused', refusal: { kind: 'unknown' } };
  }
  const policy = deps.devicePolicies.resolve(row.client_id);
  const lookup = classify(deps, row, userCode, page, approverIp, policy);
  // Only someone shown this request's approval page knows its handle: a second tab, history.
  if (lookup.kind === 'already_used' || lookup.kind === 'cancelled' || lookup.kind === 'denied') {
    return { kind: 'decided', decision: 'already_decided', appName: row.client_name };
  }
  if (lookup.kind !== 'pending') return { kind: 'refused', refusal: lookup };
  const { proximity } = lookup.request;
  if (proximity.action === 'deny') {
    await refuseByPolicy(deps, row.request_id, { userId: user.userId, ip: approverIp }, proximity, policy);
    return { kind: 'refused', refusal: { kind: 'refused_by_policy', proximity } };
  }
  if (choice.action === 'approve' && proximity.action === 'confirm' && !choice.inFrontOfMe) {
    return { kind: 'needs_confirmation', request: lookup.request };
  }
  if (choice.action === 'approve' && row.phrase !== null && choice.phrase === null) return { kind: 'needs_phrase' };
  const context = decisionContext(proximity, choice.action === 'approve' && choice.inFrontOfMe);
  const decision =
    choice.action === 'approve'
      ? // A phrase sent for a request whose device shows none is no pick: the user confirmed the code.
        await approveWithPhrase(deps, row.request_id, user, row.phrase === null ? null : choice.phrase, context, approverIp)
      : await denyRequest(deps, row.request_id, user.userId, context, approverIp);
  if (decision !== 'already_decided') {
    deps.metrics.verificationDecisions.inc({ decision });
    countDecision(deps, decision, proximity);
  }
  // A report-only override that would deny a signal raised here: this approval is what it would have refused.
  if (decision === 'approved') countProximityOverrides(policy, proximity.signals);
  return { kind: 'decided', decision, appName: row.client_name };
}
