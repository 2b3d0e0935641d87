import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { Deps } from '../../deps.js';
import { limitedAddress, reserveAttempt, waitText } from '../rate-limit.js';
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
import { showTime } from '../../accounts/devices.js';
import type { ProximityAssessment } from '../../oauth/device/proximity.js';
import { signInUrl } from './sign-in.js';

/** Each page speaks of what it connects: a bot's owner is not setting up a TV. */
const PAGES: Record<ActivationPage, { path: string; title: string; noun: 'device' | 'bot'; connected: string }> = {
  device: { path: '/activate', title: 'Connect a device', noun: 'device', connected: 'Device connected' },
  bot: { path: '/activate/bot', title: 'Connect a bot', noun: 'bot', connected: 'Bot connected' },
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
}

function renderCodeStep(deps: Deps, request: FastifyRequest, reply: FastifyReply, page: ActivationPage, model: CodeStepModel, status = 200) {
  const { title, path, noun } = PAGES[page];
  return renderPage(
    request,
    reply,
    'activate/code.eta',
    { title, action: path, noun, codeMinutes: Math.round(deps.config.deviceCodeTtl / 60), ...model },
    status,
  );
}

function refusal(page: ActivationPage, refused: RefusedCode): { status: number; message: string; link: CodeStepModel['link'] } {
  const { noun } = PAGES[page];
  switch (refused.kind) {
    case 'malformed':
      return { status: 400, message: `Codes have 8 letters, like BCDF-GHJK. Check the code on your ${noun} and try again.`, link: null };
    case 'unknown':
      return { status: 400, message: `That code was not found. Check the code on your ${noun} and try again.`, link: null };
    case 'expired':
      return { status: 410, message: `That code has expired. Start again on your ${noun} to get a new code.`, link: null };
    case 'already_used':
      return { status: 410, message: `That code has already been used. Start again on your ${noun} to get a new code.`, link: null };
    case 'cancelled':
      return {
        status: 410,
        message: `That request was cancelled because a phrase that did not match was picked. Start again on your ${noun} to get a new code.`,
        link: null,
      };
    case 'denied':
      return { status: 410, message: `That request was denied. Start again on your ${noun} to get a new code.`, link: null };
    case 'refused_by_policy':
      return { status: 403, message: policyRefusal(noun, refused.proximity), link: null };
    case 'wrong_page': {
      const right = PAGES[refused.rightPage];
      const message =
        refused.rightPage === 'bot'
          ? 'That code belongs to a bot. Bots are connected on their own page.'
          : 'That code belongs to a device, not a bot. Devices are connected on their own page.';
      return { status: 400, message, link: { href: codeStepPath(refused.rightPage, refused.userCode), text: right.title } };
    }
  }
}

function refuseCode(deps: Deps, request: FastifyRequest, reply: FastifyReply, page: ActivationPage, typed: string, refused: RefusedCode) {
  const { status, message, link } = refusal(page, refused);
  return renderCodeStep(deps, request, reply, page, { userCode: typed, message, link }, status);
}

function policyRefusal(noun: string, proximity: ProximityAssessment): string {
  const network = proximity.requester.network ? ` on ${proximity.requester.network}` : '';
  return `This request came from ${proximity.requester.where}${network}, and this service does not accept requests from there. Nothing was connected. If you are setting up a ${noun} in front of you, contact the service's support.`;
}

/** "Requested 3 minutes ago from Berlin, Germany on Hetzner Online GmbH" and what to make of it. */
function contextModel(deps: Deps, pending: PendingRequestView) {
  const { requester, sameNetwork, signals, action } = pending.proximity;
  const minutesAgo = Math.max(0, Math.floor((deps.clock.now().getTime() - pending.requestedAt.getTime()) / 60_000));
  return {
    requestedAgo: minutesAgo === 0 ? 'less than a minute ago' : `${minutesAgo} minute${minutesAgo === 1 ? '' : 's'} ago`,
    where: requester.where,
    network: requester.network,
    address: requester.address,
    sameNetwork,
    hosting: signals.includes('hosting_network'),
    countryMismatch: signals.includes('country_mismatch'),
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
  const minutesLeft = Math.max(1, Math.ceil((pending.expiresAt.getTime() - deps.clock.now().getTime()) / 60_000));
  return renderPage(
    request,
    reply,
    'activate/approve.eta',
    {
      title: PAGES[page].title,
      action: `${PAGES[page].path}/decision`,
      noun: PAGES[page].noun,
      request: pending,
      validity: { minutesLeft, until: showTime(pending.expiresAt).text },
      context: contextModel(deps, pending),
      problem,
    },
    problem ? 400 : 200,
  );
}

/**
 * What a decision page says. Only a connection is shown as a success; a denial is neutral, a
 * cancellation and a late second answer are warnings.
 */
function result(page: ActivationPage, decision: Decision, appName: string): { status: number; heading: string; message: string; tone: 'success' | 'neutral' | 'warning' } {
  const { noun, connected } = PAGES[page];
  switch (decision) {
    case 'approved':
      return { status: 200, tone: 'success', heading: connected, message: `${appName} is now connected to your account. You can close this window and return to your ${noun}.` };
    case 'denied':
      return { status: 200, tone: 'neutral', heading: 'Request denied', message: `Nothing was connected: ${appName} gets no access to your account. You can close this window.` };
    case 'cancelled_wrong_phrase':
      return {
        status: 200,
        tone: 'warning',
        heading: 'Request cancelled',
        message: `That phrase does not match the one on your ${noun}, so the request has been cancelled for your safety and ${appName} gets no access. If you are setting up a ${noun} in front of you, start again on it.`,
      };
    case 'already_decided':
      return {
        status: 409,
        tone: 'warning',
        heading: 'Already decided',
        message: `This request was already decided and can no longer change. To connect, start again on your ${noun}.`,
      };
  }
}

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
  // Browsers enforce the required radio; only a hand-made request gets here without one.
  if (!form.phrase) throw new PageError(400, 'Choose a phrase', 'Choose the phrase your device shows, then press Approve.');
  return { action: 'approve', phrase: form.phrase, inFrontOfMe: form.in_front_of_me === 'yes' };
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
  const reservation = await reserveAttempt(deps, [['userCodePerUser', userId], ['userCodePerIp', limitedAddress(deps, request)]]);
  const limit = reservation.verdict();
  if (limit.limited) {
    await reservation.refund();
    reply.header('Retry-After', String(limit.retryAfterSeconds));
    const message = `Too many wrong codes. Wait ${waitText(limit.retryAfterSeconds)}, then try again.`;
    return renderCodeStep(deps, request, reply, page, { userCode: typed, message, link: null }, 429);
  }
  let outcome: Resolution<T>;
  try {
    outcome = await resolve();
  } catch (error) {
    // Not evaluated (the database failed, say): the attempt was no guess.
    void reservation.refund();
    throw error;
  }
  if (outcome.kind === 'refused') return refuseCode(deps, request, reply, page, typed, outcome.refusal);
  await reservation.refund();
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
          found.kind === 'pending'
            ? renderApprovalStep(deps, request, reply, page, found.request)
            : refuseCode(deps, request, reply, page, typed, found),
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
          if (decided.kind === 'needs_confirmation') {
            return renderApprovalStep(
              deps,
              request,
              reply,
              page,
              decided.request,
              `Tick “I am setting up a ${PAGES[page].noun} that is in front of me” to approve, or press Deny.`,
            );
          }
          const shownResult = result(page, decided.decision, decided.appName);
          return renderPage(
            request,
            reply,
            'activate/result.eta',
            { title: shownResult.heading, message: shownResult.message, tone: shownResult.tone, againHref: path, noun: PAGES[page].noun },
            shownResult.status,
          );
        },
      );
    });
  }
}
