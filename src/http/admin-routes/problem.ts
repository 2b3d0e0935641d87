import type { FastifyReply } from 'fastify';

/**
 * RFC 9457 problem details: every admin API error is one of these. `type` names the kind of
 * problem for programs (stable); `title` is its short human summary; `detail` says what to do.
 */
export class Problem extends Error {
  constructor(
    readonly status: number,
    readonly type: string,
    readonly title: string,
    readonly detail: string,
    readonly extra: Record<string, unknown> = {},
  ) {
    super(detail);
  }
}

const TYPE_PREFIX = 'urn:device-auth:problem:';

export const notFound = (detail: string) => new Problem(404, `${TYPE_PREFIX}not-found`, 'Not found', detail);
export const conflict = (slug: string, detail: string) => new Problem(409, `${TYPE_PREFIX}${slug}`, 'Conflict', detail);
export const invalidInput = (detail: string, errors: { path: string; message: string }[] = []) =>
  new Problem(400, `${TYPE_PREFIX}invalid-input`, 'Invalid input', detail, errors.length > 0 ? { errors } : {});
export const unauthorized = () =>
  new Problem(401, `${TYPE_PREFIX}unauthorized`, 'Unauthorized', 'send the admin token as `Authorization: Bearer $ADMIN_TOKEN`');

export function sendProblem(reply: FastifyReply, problem: Problem): FastifyReply {
  return reply
    .code(problem.status)
    .header('Content-Type', 'application/problem+json; charset=utf-8')
    .header('Cache-Control', 'no-store')
    .send(JSON.stringify({ type: problem.type, title: problem.title, status: problem.status, detail: problem.detail, ...problem.extra }));
}
