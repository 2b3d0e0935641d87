import type { FastifyInstance } from 'fastify';
import { MalformedText, parseFormBody, parseQueryString, type UrlEncoded } from '../url-encoded.js';

/**
 * Past this a request line is refused: nothing downstream (a redirect's Location, a log line)
 * is ever handed an address longer than clients and proxies accept.
 */
export const MAX_URL_LENGTH = 8 * 1024;

class UriTooLong extends Error {
  readonly statusCode = 414;
  constructor() {
    super(`the request URL is longer than ${MAX_URL_LENGTH} characters`);
  }
}

const REFUSED = Symbol('refused query');
type ParsedQuery = UrlEncoded & { [REFUSED]?: MalformedText };

/**
 * The router's query parser. The router cannot take a throw, so a query that is not text we can
 * store parses to no parameters plus the reason, and the onRequest hook below refuses it.
 */
export function strictQueryParser(query: string): ParsedQuery {
  try {
    return parseQueryString(query);
  } catch (error) {
    if (!(error instanceof MalformedText)) throw error;
    const refused: ParsedQuery = Object.create(null) as ParsedQuery;
    refused[REFUSED] = error;
    return refused;
  }
}

/**
 * Every byte a request carries in its URL or form body is checked here, before any route runs,
 * so no route can forget it: a bad one is a 400 (invalid_request on /oauth/*, a page elsewhere),
 * an overlong URL a 414. Build the app with strictQueryParser as its router's querystringParser.
 */
export function registerStrictInput(app: FastifyInstance): void {
  app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'buffer' }, (_request, body, done) => {
    try {
      done(null, parseFormBody(body as Buffer));
    } catch (error) {
      done(error as Error, undefined);
    }
  });

  registerStrictUrl(app);
}

/** The URL half of registerStrictInput, for an app (the admin API) that takes no form bodies. */
export function registerStrictUrl(app: FastifyInstance): void {
  // Synchronous: it runs on every request, and an async hook costs a promise each time.
  app.addHook('onRequest', (request, _reply, done) => {
    if (request.url.length > MAX_URL_LENGTH) return done(new UriTooLong());
    const refused = (request.query as ParsedQuery | undefined)?.[REFUSED];
    done(refused);
  });
}
