import type { FastifyReply, FastifyRequest } from 'fastify';
import { escapeHtml, loadCatalogues, Markup, type Translator } from '../i18n/catalogues.js';
import { describePlace, type PlaceFacts } from '../i18n/places.js';

/** Loaded once, like the templates: locales/*.json. */
export const pageCatalogues = loadCatalogues();

/** The reader's language, from Accept-Language; English when we have none of theirs. */
export function translatorFor(request: FastifyRequest): Translator {
  return pageCatalogues.forAcceptLanguage(request.headers['accept-language']);
}

/**
 * What every template gets to speak the reader's language: `t` for text, `html` for a message
 * with emphasis, and helpers for what recurs (a time, a place). The response says which language
 * it is in, and that it depends on Accept-Language, so no cache serves it to someone else.
 */
export function languageModel(request: FastifyRequest, reply: FastifyReply) {
  const i18n = translatorFor(request);
  reply.header('Content-Language', i18n.language).header('Vary', 'Accept-Language');
  return {
    i18n,
    t: i18n.t,
    html: i18n.html,
    /** How long before `now` (the page's deps.clock) a date was; the element carries the exact instant. */
    timeTag: (date: Date, now: Date) => new Markup(`<time datetime="${date.toISOString()}">${escapeHtml(i18n.ago(date, now))}</time>`),
    placeText: (place: PlaceFacts) => describePlace(i18n, place, 'list'),
  };
}
