import { isUtf8 } from 'node:buffer';

/**
 * application/x-www-form-urlencoded, decoded strictly: the same rules for form bodies and query
 * strings. PostgreSQL cannot store U+0000, and a value that is not well-formed UTF-8 has no
 * meaning we could keep, so both are refused here instead of reaching a route. The usual parsers
 * do worse: fast-querystring keeps an undecodable value as its raw "%FF" text and Buffer#toString
 * turns raw invalid bytes into U+FFFD, each silently changing what was sent.
 */

export type UrlEncoded = Record<string, string | string[]>;

/** A form or query that is not text we can store. The message names no value: it may be anything. */
export class MalformedText extends Error {
  readonly statusCode = 400;
}

const NUL = '\u0000';

/** Names the parameter for the client developer, unless the name itself is long or odd. */
function parameterLabel(name: string | null): string {
  return name !== null && /^[\x21-\x7e]{1,64}$/.test(name) ? `parameter ${name}` : 'a parameter';
}

/**
 * decodeURIComponent refuses a malformed escape, an escaped byte sequence that is not UTF-8,
 * an overlong form (%C0%AF) and an escaped surrogate (%ED%A0%80), so what it returns is well-formed.
 * `name` is the decoded name when `raw` is a value, null when `raw` is a name.
 */
function decodeComponent(raw: string, name: string | null): string {
  const spaced = raw.includes('+') ? raw.replaceAll('+', ' ') : raw;
  if (!spaced.includes('%')) return spaced;
  let decoded: string;
  try {
    decoded = decodeURIComponent(spaced);
  } catch {
    throw new MalformedText(`${parameterLabel(name)} is not valid percent-encoded UTF-8`);
  }
  if (decoded.includes(NUL)) throw new MalformedText(`${parameterLabel(name)} contains a NUL character`);
  return decoded;
}

/**
 * Parses well-formed text (no lone surrogates: see the callers) into parameters; a repeated
 * name gives an array, which the routes refuse (RFC 6749 §3.1).
 */
function parseText(text: string): UrlEncoded {
  // A raw NUL: refused before splitting, so the reason names no parameter.
  if (text.includes(NUL)) throw new MalformedText('the request contains a NUL character');
  // No prototype: a parameter named __proto__ or constructor is only a name.
  const parameters: UrlEncoded = Object.create(null) as UrlEncoded;
  let start = 0;
  while (start <= text.length) {
    let end = text.indexOf('&', start);
    if (end < 0) end = text.length;
    if (end > start) {
      // Searched within the pair only: "a&a&a…" must not rescan the rest of the body for every pair.
      const pair = text.slice(start, end);
      const equals = pair.indexOf('=');
      const name = decodeComponent(equals < 0 ? pair : pair.slice(0, equals), null);
      const value = equals < 0 ? '' : decodeComponent(pair.slice(equals + 1), name);
      const previous = parameters[name];
      if (previous === undefined) parameters[name] = value;
      else if (Array.isArray(previous)) previous.push(value);
      else parameters[name] = [previous, value];
    }
    start = end + 1;
  }
  return parameters;
}

/** A form body: its raw bytes must be UTF-8 (no surrogates, no overlong forms) before anything is decoded. */
export function parseFormBody(body: Buffer): UrlEncoded {
  if (!isUtf8(body)) throw new MalformedText('the request body is not valid UTF-8');
  return parseText(body.toString('utf8'));
}

// RFC 3986 §2: a URL is printable ASCII; anything else was put there by hand, not by a browser.
const NOT_URL_TEXT = /[^\x21-\x7e]/;

/** A query string as it arrived in the request line (without the '?'). */
export function parseQueryString(query: string): UrlEncoded {
  if (NOT_URL_TEXT.test(query)) throw new MalformedText('the query string has characters that are not printable ASCII; percent-encode them');
  return parseText(query);
}
