import type { FastifyInstance } from 'fastify';
import { renderPage } from './render.js';
import { translatorFor } from '../page-language.js';

/** `/`: where each thing a user comes here for is, rather than a 404. */
export function homeRoutes(app: FastifyInstance): void {
  app.get('/', async (request, reply) => renderPage(request, reply, 'home.eta', { title: translatorFor(request).t('home.title') }));
}
