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
import { signInUrl } from './sign-in.js';

const PAGES: Record<ActivationPage, { path: string; title: string }> = {
  device: { path: '/activate', title: 'Connect a device' },
  bot: { path: '/activate/bot', title: 'Connect a bot' },
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

function renderCodeStep(request: FastifyRequest, reply: FastifyReply, page: ActivationPage, model: CodeStepModel, status = 200) {
  return renderPage(request, reply, 'activate/code.eta', { title: PAGES[page].title, action: PAGES[page].path, ...model }, status);
}

function refusal(refused: RefusedCode): { status: number; message: string; link: CodeStepModel['link'] } {
  switch (refused.kind) {
    case 'malformed':
      return { status: 400, message: 'Codes have 8 letters, like BCDF-GHJK. Check the code on your device and try again.', link: null };
    case 'unknown':
      return { status: 400, message: 'That code was not found. Check the code on your device and try again.', link: null };
    case 'expired':
      return { status: 410, message: 'That code has expired. Start again on your device to get a new code.', link: null };
    case 'already_used':
      return { status: 410, message: 'That code has already been used. Start again on your device to get a new code.', link: null };
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

function refuseCode(request: FastifyRequest, reply: FastifyReply, page: ActivationPage, typed: string, refused: RefusedCode) {
  const { status, message, link } = refusal(refused);
  return renderCodeStep(request, reply, page, { userCode: typed, message, link }, status);
}

function renderApprovalStep(request: FastifyRequest, reply: FastifyReply, page: ActivationPage, pending: PendingRequestView) {
  return renderPage(request, reply, 'activate/approve.eta', {
    title: PAGES[page].title,
    action: `${PAGES[page].path}/decision`,
    request: pending,
  });
}

const RESULTS: Record<Decision, { status: number; message: string; tone: 'notice' | 'message' }> = {
  approved: { status: 200, tone: 'notice', message: 'Device connected. You can return to your device.' },
  denied: { status: 200, tone: 'notice', message: 'Request denied.' },
  cancelled_wrong_phrase: {
    status: 200,
    tone: 'message',
    message: 'That phrase does not match the one on your device. The request has been cancelled for your safety; start again on the device.',
  },
  already_decided: {
    status: 409,
    tone: 'message',
    message: 'This request was already decided and can no longer change. To connect, start again on your device.',
  },
};

const codeInput = z.object({ user_code: z.string().default('') });
const decisionForm = z.object({
  user_code: z.string(),
  request_handle: z.string(),
  action: z.enum(['approve', 'deny']),
  phrase: z.string().optional(),
});

function decisionChoice(form: z.output<typeof decisionForm>): DecisionChoice {
  if (form.action === 'deny') return { action: 'deny' };
  // Browsers enforce the required radio; only a hand-made request gets here without one.
  if (!form.phrase) throw new PageError(400, 'Choose a phrase', 'Choose the phrase your device shows, then press Approve.');
  return { action: 'approve', phrase: form.phrase };
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
    return renderCodeStep(request, reply, page, { userCode: typed, message, link: null }, 429);
  }
  let outcome: Resolution<T>;
  try {
    outcome = await resolve();
  } catch (error) {
    // Not evaluated (the database failed, say): the attempt was no guess.
    void reservation.refund();
    throw error;
  }
  if (outcome.kind === 'refused') return refuseCode(request, reply, page, typed, outcome.refusal);
  await reservation.refund();
  return render(outcome.value);
}

export function activateRoutes(app: FastifyInstance, deps: Deps): void {
  for (const page of ['device', 'bot'] as const) {
    const { path } = PAGES[page];

    app.get(path, async (request, reply) => {
      const typed = parsePageForm(codeInput, request.query).user_code;
      if (!request.session?.user) return reply.redirect(signInUrl(codeStepPath(page, typed)), 303);
      return renderCodeStep(request, reply, page, { userCode: normaliseUserCode(typed) ?? typed, message: null, link: null });
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
          const lookup = await lookUpUserCode(deps, typed, page);
          return lookup.kind === 'pending' ? { kind: 'resolved', value: lookup.request } : { kind: 'refused', refusal: lookup };
        },
        (pending) => renderApprovalStep(request, reply, page, pending),
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
          const outcome = await decideShownRequest(deps, page, shown, user, choice);
          return outcome.kind === 'refused' ? outcome : { kind: 'resolved', value: outcome.decision };
        },
        (decision) => {
          const result = RESULTS[decision];
          return renderPage(
            request,
            reply,
            'activate/result.eta',
            { title: PAGES[page].title, message: result.message, tone: result.tone, againHref: path },
            result.status,
          );
        },
      );
    });
  }
}
