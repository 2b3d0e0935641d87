import type { FastifyReply, FastifyRequest } from 'fastify';
import { layoutModel } from '../plugins/session.js';
import { languageModel } from '../page-language.js';

/**
 * Renders a page with what the layout needs (signed-in state, CSRF token, the reader's language)
 * added to its view model. `title` is already in the reader's language. `wayBack` is where the
 * header's "Not you?" brings the next person after signing in: the page itself when it was loaded
 * with GET; a page answering a form names its own. /signout checks it with localReturnPath, which
 * takes an empty one to /activate.
 */
export function renderPage(
  request: FastifyRequest,
  reply: FastifyReply,
  template: string,
  model: { title: string; wayBack?: string } & Record<string, unknown>,
  status = 200,
): FastifyReply {
  const wayBack = model.wayBack ?? (request.method === 'GET' ? request.url : '');
  return reply.code(status).view(template, { ...layoutModel(request), ...languageModel(request, reply), ...model, wayBack });
}
