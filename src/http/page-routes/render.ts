import type { FastifyReply, FastifyRequest } from 'fastify';
import { layoutModel } from '../plugins/session.js';
import { languageModel } from '../page-language.js';

/**
 * Renders a page with what the layout needs (signed-in state, CSRF token, the reader's language)
 * added to its view model. `title` is already in the reader's language.
 */
export function renderPage(
  request: FastifyRequest,
  reply: FastifyReply,
  template: string,
  model: { title: string } & Record<string, unknown>,
  status = 200,
): FastifyReply {
  return reply.code(status).view(template, { ...layoutModel(request), ...languageModel(request, reply), ...model });
}
