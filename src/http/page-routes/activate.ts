import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { Deps } from '../../deps.js';
import { limitedAddress, waitText } from '../rate-limit.js';
import { guardedAttempt } from '../../rate-limits/guarded-attempt.js';
import { PageError } from '../../oauth/errors.js';
import { normaliseUserCode } from '../../oauth/device/user-code.js';
import {
  decideShownRequest,
  lookUpUserCode,
  type ActivationPage,
  type Decision,
  type DecisionChoice,
  type PendingRequestView,
  type RefusedCode,
} from '../../oauth/device/verification.js';
import { parsePageForm } from '../form.js';
import { renderPage } from './render.js';
import type { MessageKey, Translator } from '../../i18n/catalogues.js';
import { describePlace, describeWhere } from '../../i18n/places.js';
import type { ProximitySignal } from '../../oauth/device/proximity.js';
import { translatorFor } from '../page-language.js';
import { signInUrl } from './sign-in.js';

/** Each page speaks of what it connects: a bot's owner is not setting up a TV. */
const PAGES: Record<ActivationPage, { path: string; kind: 'device' | 'bot' }> = {
  device: { path: '/activate', kind: 'device' },
  bot: { path: '/activate/bot', kind: 'bot' },
};

/**
 * Codes are 8 letters and a dash; this leaves room for spaces and typos. Anything longer is not
 * carried into an address (a redirect's Location), where it would only make the header huge.
 */
const MAX_TYPED_USER_CODE = 64;

function codeStepPath(page: ActivationPage, userCode: string): string {
  const { path } = PAGES[page];
  return userCode && userCode.length <= MAX_TYPED_USER_CODE ? `${path}?user_code=${encodeURIComponent(userCode)}` : path;
}

interface CodeStepModel {
  userCode: string;
  message: string | null;
  link: { href: string; text: string } | null;
  /** The message names where the request came from: the footer credits the data (CC BY 4.0). */
  usesLocationData?: boolean;
}

function renderCodeStep(deps: Deps, request: FastifyRequest, reply: FastifyReply, page: ActivationPage, model: CodeStepModel, status = 200) {
  const { path, kind } = PAGES[page];
  return renderPage(
    request,
    reply,
    'activate/code.eta',
    {
      title: translatorFor(request).t('activate.title', { kind }),
      action: path,
      kind,
      codeMinutes: Math.round(deps.config.deviceCodeTtl / 60),
      wayBack: codeStepPath(page, model.userCode),
      ...model,
    },
    status,
  );
}

const REFUSED_MESSAGES = {
  malformed: { status: 400, key: 'activate.refused.malformed' },
  unknown: { status: 400, key: 'activate.refused.unknown' },
  expired: { status: 410, key: 'activate.refused.expired' },
  already_used: { status: 410, key: 'activate.refused.already_used' },
  cancelled: { status: 410, key: 'activate.refused.cancelled' },
  denied: { status: 410, key: 'activate.refused.denied' },
} as const satisfies Record<string, { status: number; key: MessageKey }>;

function refusal(i18n: Translator, page: ActivationPage, refused: RefusedCode): { status: number; message: string; link: CodeStepModel['link'] } {
  const { kind } = PAGES[page];
  switch (refused.kind) {
    case 'refused_by_policy':
      return {
        status: 403,
        message: i18n.t('activate.refused.policy', { kind, from: describePlace(i18n, refused.proximity.requester, 'sentence') }),
        link: null,
      };
    case 'wrong_page': {
      const right = PAGES[refused.rightPage];
      const message = i18n.t(refused.rightPage === 'bot' ? 'activate.refused.belongs_to_bot' : 'activate.refused.belongs_to_device');
      return { status: 400, message, link: { href: codeStepPath(refused.rightPage, refused.userCode), text: i18n.t('activate.title', { kind: right.kind }) } };
    }
    default: {
      const { status, key } = REFUSED_MESSAGES[refused.kind];
      return { status, message: i18n.t(key, { kind }), link: null };
    }
  }
}

function refuseCode(deps: Deps, request: FastifyRequest, reply: FastifyReply, page: ActivationPage, typed: string, refused: RefusedCode) {
  const { status, message, link } = refusal(translatorFor(request), page, refused);
  const usesLocationData = refused.kind === 'refused_by_policy';
  return renderCodeStep(deps, request, reply, page, { userCode: typed, message, link, usesLocationData }, status);
}

/** The warning each raised signal gives on the approval page, in this order. */
const SIGNAL_WARNINGS = [
  ['hosting_network', 'approve.warning_hosting'],
  ['relay_network', 'approve.warning_relay'],
  ['country_mismatch', 'approve.warning_country'],
  ['unknown_location', 'approve.warning_unknown'],
] as const satisfies readonly (readonly [ProximitySignal, MessageKey])[];

/** "Requested 3 minutes ago from Berlin, Germany on Hetzner Online GmbH" and what to make of it. */
function contextModel(deps: Deps, i18n: Translator, pending: PendingRequestView) {
  const { requester, sameNetwork, sameProvider, signals, action } = pending.proximity;
  const minutesAgo = Math.max(0, Math.floor((deps.clock.now().getTime() - pending.requestedAt.getTime()) / 60_000));
  return {
    requestedAgo: i18n.t('time.minutes_ago', { minutes: minutesAgo }),
    where: describeWhere(i18n, requester),
    network: requester.network,
    address: requester.address,
    /** Only for the same address or IPv6 prefix with no signal raised (proximity.ts). */
    sameNetwork,
    /** The shared AS's name, for the weaker statement; never instead of a warning. */
    sameProvider,
    hosting: signals.includes('hosting_network'),
    relay: signals.includes('relay_network'),
    countryMismatch: signals.includes('country_mismatch'),
    /** One sentence per raised signal: none hides another. */
    warnings: SIGNAL_WARNINGS.filter(([signal]) => signals.includes(signal)).map(([signal, key]) =>
      // Either side may be the one that cannot be placed: say which.
      i18n.t(signal === 'unknown_location' && requester.kind === 'public' && requester.country !== null ? 'approve.warning_unknown_approver' : key),
    ),
    warn: action === 'warn' || action === 'confirm',
    confirm: action === 'confirm',
  };
}

function renderApprovalStep(
  deps: Deps,
  request: FastifyRequest,
  reply: FastifyReply,
  page: ActivationPage,
  pending: PendingRequestView,
  problem: string | null = null,
) {
  const i18n = translatorFor(request);
  const { kind, path } = PAGES[page];
  const minutesLeft = Math.max(1, Math.ceil((pending.expiresAt.getTime() - deps.clock.now().getTime()) / 60_000));
  return renderPage(
    request,
    reply,
    'activate/approve.eta',
    {
      title: i18n.t('activate.title', { kind }),
      action: `${path}/decision`,
      kind,
      request: pending,
      validity: { minutesLeft },
      context: contextModel(deps, i18n, pending),
      problem,
      usesLocationData: true,
      wayBack: codeStepPath(page, pending.userCode),
    },
    problem ? 400 : 200,
  );
}

/**
 * What a decision page says. Only a connection is shown as a success; a denial is neutral, a
 * cancellation and a late second answer are warnings.
 */
const RESULTS = {
  approved: { status: 200, tone: 'success', heading: 'result.connected', message: 'result.connected_message' },
  denied: { status: 200, tone: 'neutral', heading: 'result.denied', message: 'result.denied_message' },
  cancelled_wrong_phrase: { status: 200, tone: 'warning', heading: 'result.cancelled', message: 'result.cancelled_message' },
  already_decided: { status: 409, tone: 'warning', heading: 'result.already_decided', message: 'result.already_decided_message' },
} as const satisfies Record<Decision, { status: number; tone: 'success' | 'neutral' | 'warning'; heading: MessageKey; message: MessageKey }>;

const codeInput = z.object({ user_code: z.string().default('') });
const decisionForm = z.object({
  user_code: z.string(),
  request_handle: z.string(),
  action: z.enum(['approve', 'deny']),
  phrase: z.string().optional(),
  in_front_of_me: z.literal('yes').optional(),
});

function decisionChoice(form: z.output<typeof decisionForm>): DecisionChoice {
  if (form.action === 'deny') return { action: 'deny' };
  return { action: 'approve', phrase: form.phrase || null, inFrontOfMe: form.in_front_of_me === 'yes' };
}

type Resolution<T> = { kind: 'refused'; refusal: RefusedCode } | { kind: 'resolved'; value: T };

/**
 * RFC 8628 §5.1: every path that resolves a user code or a request runs through here, so wrong
 * guesses are limited per user and per address whichever form they come by. The attempt is
 * counted before the code is looked at (a reservation), so of many sent at once only the limit's
 * worth are evaluated; one that resolves gives its count back, one that is refused keeps it.
 */
async function resolveWithinGuessLimit<T>(
  deps: Deps,
  request: FastifyRequest,
  reply: FastifyReply,
  page: ActivationPage,
  typed: string,
  userId: string,
  resolve: () => Promise<Resolution<T>>,
  render: (resolved: T) => FastifyReply,
) {
  const guarded = await guardedAttempt(deps.rateLimiter, deps.clock.now(), {
    limits: [
      ['userCodePerUser', userId],
      ['userCodePerIp', limitedAddress(deps, request)],
    ],
    evaluate: resolve,
    // A wrong guess keeps its count; one that resolves gives it back.
    kept: (outcome) => (outcome.kind === 'refused' ? 'all' : 'none'),
  });
  if (guarded.limited) {
    reply.header('Retry-After', String(guarded.retryAfterSeconds));
    const i18n = translatorFor(request);
    const message = i18n.t('activate.refused.too_many', { wait: waitText(i18n, guarded.retryAfterSeconds) });
    return renderCodeStep(deps, request, reply, page, { userCode: typed, message, link: null }, 429);
  }
  const { outcome } = guarded;
  if (outcome.kind === 'refused') return refuseCode(deps, request, reply, page, typed, outcome.refusal);
  return render(outcome.value);
}

export function activateRoutes(app: FastifyInstance, deps: Deps): void {
  for (const page of ['device', 'bot'] as const) {
    const { path } = PAGES[page];

    app.get(path, async (request, reply) => {
      const typed = parsePageForm(codeInput, request.query).user_code;
      if (!request.session?.user) return reply.redirect(signInUrl(codeStepPath(page, typed)), 303);
      return renderCodeStep(deps, request, reply, page, { userCode: normaliseUserCode(typed) ?? typed, message: null, link: null });
    });

    app.post(path, async (request, reply) => {
      const typed = parsePageForm(codeInput, request.body).user_code;
      const user = request.session?.user;
      if (!user) return reply.redirect(signInUrl(codeStepPath(page, typed)), 303);
      return resolveWithinGuessLimit(
        deps,
        request,
        reply,
        page,
        typed,
        user.userId,
        async () => {
          const lookup = await lookUpUserCode(deps, typed, page, { userId: user.userId, ip: request.ip });
          // A request the policy refused was named by a right code: no wrong guess to count.
          if (lookup.kind === 'pending' || lookup.kind === 'refused_by_policy') return { kind: 'resolved', value: lookup };
          return { kind: 'refused', refusal: lookup };
        },
        (found) =>
          found.kind === 'pending' ? renderApprovalStep(deps, request, reply, page, found.request) : refuseCode(deps, request, reply, page, typed, found),
      );
    });

    app.post(`${path}/decision`, async (request, reply) => {
      const form = parsePageForm(decisionForm, request.body);
      const user = request.session?.user;
      if (!user) return reply.redirect(signInUrl(codeStepPath(page, form.user_code)), 303);
      const shown = { userCode: form.user_code, handle: form.request_handle };
      const choice = decisionChoice(form);
      return resolveWithinGuessLimit(
        deps,
        request,
        reply,
        page,
        form.user_code,
        user.userId,
        async () => {
          const outcome = await decideShownRequest(deps, page, shown, user, choice, request.ip);
          if (outcome.kind === 'refused' && outcome.refusal.kind !== 'refused_by_policy') return outcome;
          return { kind: 'resolved', value: outcome };
        },
        (decided) => {
          if (decided.kind === 'refused') return refuseCode(deps, request, reply, page, form.user_code, decided.refusal);
          // Browsers enforce the required radio; only a hand-made request gets here without one.
          if (decided.kind === 'needs_phrase') throw new PageError(400, 'error.choose_phrase', 'error.choose_phrase_message', { kind: PAGES[page].kind });
          if (decided.kind === 'needs_confirmation') {
            const problem = translatorFor(request).t('approve.tick_to_approve', { kind: PAGES[page].kind });
            return renderApprovalStep(deps, request, reply, page, decided.request, problem);
          }
          const i18n = translatorFor(request);
          const { kind } = PAGES[page];
          const said = RESULTS[decided.decision];
          return renderPage(
            request,
            reply,
            'activate/result.eta',
            {
              title: i18n.t(said.heading, { kind }),
              message: i18n.t(said.message, { kind, app: decided.appName }),
              tone: said.tone,
              againHref: path,
              kind,
              wayBack: path,
            },
            said.status,
          );
        },
      );
    });
  }
}
