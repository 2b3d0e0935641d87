import type { FastifyReply, FastifyRequest } from 'fastify';
import { layoutModel } from '../plugins/session.js';

/** Renders a page with what the layout needs (signed-in state, CSRF token) added to its view model. */
export function renderPage(
  request: FastifyRequest,
  reply: FastifyReply,
  template: string,
  model: { title: string } & Record<string, unknown>,
  status = 200,
): FastifyReply {
  return reply.code(status).view(template, { ...layoutModel(request), ...model });
}
