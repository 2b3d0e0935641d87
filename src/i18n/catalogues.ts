import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { parse, TYPE, type MessageFormatElement } from '@formatjs/icu-messageformat-parser';
import { IntlMessageFormat } from 'intl-messageformat';
import { z } from 'zod';
import type english from '../../locales/en.json';
import { projectRoot } from '../lib/paths.js';
import { negotiateLanguage } from './negotiate.js';

/**
 * Every user-facing string of the pages lives in one catalogue per language, locales/<tag>.json,
 * in ICU MessageFormat (what translation tools speak): `{name}` arguments, `{count, plural, …}`,
 * `{kind, select, bot {…} other {…}}`, and `<strong>…</strong>` where a page emphasises words.
 * English is complete by definition; another catalogue is checked against it when loaded: a
 * missing or broken message, or one whose arguments differ from English's, is served in English
 * and reported (tests fail on any report for a shipped catalogue).
 */
export type MessageKey = keyof (typeof english)['messages'];
export type MessageValues = Readonly<Record<string, string | number>>;

/** Markup built by our own code from escaped parts (a <time> element, say), for html() to insert as is. */
export class Markup {
  constructor(readonly markup: string) {}
}
export type MarkupValues = Readonly<Record<string, string | number | Markup>>;

const DEFAULT_LANGUAGE = 'en';
export const localesFolder = path.join(projectRoot, 'locales');

const catalogueFile = z.object({
  /** The language's own name for itself, e.g. "Deutsch". */
  name: z.string().min(1),
  /** The locale dates, numbers and country names are formatted for, e.g. "en-GB". */
  locale: z.string().min(2),
  messages: z.record(z.string(), z.string()),
});

/** Tags a message may use; each becomes the same element in HTML and nothing in plain text. */
const RICH_TAGS = ['strong'] as const;

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
export const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (char) => ESCAPES[char]!);

const toMarkup = (part: unknown): string => (part instanceof Markup ? part.markup : escapeHtml(String(part)));

const htmlTags = Object.fromEntries(RICH_TAGS.map((tag) => [tag, (chunks: unknown[]) => new Markup(`<${tag}>${chunks.map(toMarkup).join('')}</${tag}>`)]));
const textTags = Object.fromEntries(RICH_TAGS.map((tag) => [tag, (chunks: unknown[]) => chunks.map(String).join('')]));

/** What the loader keeps of a message: the compiled form, and which arguments choose a branch. */
interface CompiledMessage {
  format: IntlMessageFormat;
  /** Arguments of a select or plural: html() must hand these over as they are, not wrapped. */
  selectors: ReadonlySet<string>;
}

function walk(elements: MessageFormatElement[], visit: (element: MessageFormatElement) => void): void {
  for (const element of elements) {
    visit(element);
    if (element.type === TYPE.plural || element.type === TYPE.select) {
      for (const option of Object.values(element.options)) walk(option.value, visit);
    } else if (element.type === TYPE.tag) {
      walk(element.children, visit);
    }
  }
}

/** The argument and tag names a message uses, sorted: a translation must use the same ones. */
export function messageArguments(message: string): string[] {
  const names = new Set<string>();
  walk(parse(message), (element) => {
    if (element.type === TYPE.tag) names.add(`<${element.value}>`);
    else if (element.type !== TYPE.literal && element.type !== TYPE.pound) names.add(element.value);
  });
  return [...names].sort();
}

function compile(message: string, locale: string): CompiledMessage {
  const selectors = new Set<string>();
  walk(parse(message), (element) => {
    if (element.type === TYPE.plural || element.type === TYPE.select) selectors.add(element.value);
  });
  return { format: new IntlMessageFormat(message, locale), selectors };
}

export interface Translator {
  /** The catalogue's tag, e.g. "de": for <html lang> and Content-Language. */
  readonly language: string;
  /** Plain text; the templates escape it. */
  t(key: MessageKey, values?: MessageValues): string;
  /** HTML with every argument and every word of the message escaped; only RICH_TAGS become markup. */
  html(key: MessageKey, values?: MarkupValues): string;
  /** "21 Nov 2026, 21:04 UTC" in the language's own way: the server cannot know the reader's time zone. */
  time(date: Date): string;
  /**
   * "3 minutes ago", "yesterday", "2 months ago": how long before `now` a date was, in the
   * language's own words. Pages show times this way (issue 27 §5): it needs no time zone, and
   * pages run no script that could convert one.
   */
  ago(date: Date, now: Date): string;
  /** A country's name in this language, from its ISO 3166-1 code. */
  country(code: string): string;
  /** What a scope lets an app do ("See your name"); an unknown scope is shown by its name. */
  scope(name: string): string;
}

export interface Catalogues {
  languages: readonly string[];
  /** What is wrong with a catalogue, one line each; empty when every catalogue is complete. */
  problems: string[];
  translator(language: string): Translator;
  /** The translator for a request's Accept-Language header. */
  forAcceptLanguage(header: string | undefined): Translator;
}

function readCatalogue(file: string) {
  return catalogueFile.parse(JSON.parse(readFileSync(file, 'utf8')));
}

/** The unit a past time is told in: the largest whose size it exceeds ([unit, seconds in one, told in it below]). */
const AGO_UNITS: readonly (readonly [Intl.RelativeTimeFormatUnit, number, number])[] = [
  ['minute', 60, 3600],
  ['hour', 3600, 86_400],
  ['day', 86_400, 30 * 86_400],
  ['month', 30 * 86_400, 365 * 86_400],
  ['year', 365 * 86_400, Infinity],
];

function buildTranslator(language: string, locale: string, formats: Map<string, CompiledMessage>): Translator {
  const dateTime = new Intl.DateTimeFormat(locale, {
    day: 'numeric',
    month: 'short',
    year: 'numeric',
    hour: '2-digit',
    minute: '2-digit',
    hourCycle: 'h23',
    timeZone: 'UTC',
  });
  const regions = new Intl.DisplayNames([locale], { type: 'region', fallback: 'code' });
  const relative = new Intl.RelativeTimeFormat(locale, { numeric: 'auto' });
  const message = (key: MessageKey) => {
    const compiled = formats.get(key);
    if (!compiled) throw new Error(`no message ${key} in the English catalogue`);
    return compiled;
  };
  const t: Translator['t'] = (key, values = {}) => {
    const result = message(key).format.format({ ...values, ...textTags });
    return Array.isArray(result) ? result.map(String).join('') : String(result);
  };
  return {
    language,
    t,
    html: (key, values = {}) => {
      // Arguments are wrapped so that they stay separate parts (and get escaped) rather than being
      // merged into the message's own words.
      const { format, selectors } = message(key);
      const wrapped = Object.fromEntries(
        Object.entries(values).map(([name, value]) => [name, typeof value === 'string' && !selectors.has(name) ? new Markup(escapeHtml(value)) : value]),
      );
      const result = format.format({ ...wrapped, ...htmlTags });
      return Array.isArray(result) ? result.map(toMarkup).join('') : toMarkup(result);
    },
    time: (date) => `${dateTime.format(date)} UTC`,
    ago: (date, now) => {
      const seconds = Math.max(0, (now.getTime() - date.getTime()) / 1000);
      if (seconds < 60) return t('time.minutes_ago', { minutes: 0 });
      const [unit, size] = AGO_UNITS.find(([, , below]) => seconds < below) ?? AGO_UNITS[AGO_UNITS.length - 1]!;
      return relative.format(-Math.floor(seconds / size), unit);
    },
    country: (code) => regions.of(code) ?? code,
    scope: (name) => {
      const key = `scope.${name}`;
      return formats.has(key) ? t(key as MessageKey) : name;
    },
  };
}

/**
 * Loads every locales/*.json. English must be there and sound; in another language, a message
 * that is missing, does not parse or uses other arguments than English's falls back to English.
 */
export function loadCatalogues(folder: string = localesFolder): Catalogues {
  const english = readCatalogue(path.join(folder, `${DEFAULT_LANGUAGE}.json`));
  const englishFormats = new Map<string, CompiledMessage>();
  const englishArguments = new Map<string, string>();
  for (const [key, message] of Object.entries(english.messages)) {
    englishFormats.set(key, compile(message, english.locale));
    englishArguments.set(key, messageArguments(message).join(' '));
  }
  const problems: string[] = [];
  const translators = new Map<string, Translator>([[DEFAULT_LANGUAGE, buildTranslator(DEFAULT_LANGUAGE, english.locale, englishFormats)]]);

  const others = readdirSync(folder)
    .filter((name) => name.endsWith('.json') && name !== `${DEFAULT_LANGUAGE}.json`)
    .sort();
  for (const name of others) {
    const language = name.slice(0, -'.json'.length).toLowerCase();
    let catalogue;
    try {
      catalogue = readCatalogue(path.join(folder, name));
    } catch (error) {
      problems.push(`${name}: not a catalogue (${error instanceof Error ? error.message.split('\n')[0] : String(error)}); not served`);
      continue;
    }
    const formats = new Map<string, CompiledMessage>();
    for (const [key, englishFormat] of englishFormats) {
      const message = catalogue.messages[key];
      if (message === undefined) {
        problems.push(`${name}: ${key} is missing; served in English`);
        formats.set(key, englishFormat);
        continue;
      }
      try {
        const used = messageArguments(message).join(' ');
        if (used !== englishArguments.get(key)) {
          problems.push(`${name}: ${key} uses {${used}} where English uses {${englishArguments.get(key)}}; served in English`);
          formats.set(key, englishFormat);
          continue;
        }
        formats.set(key, compile(message, catalogue.locale));
      } catch (error) {
        problems.push(`${name}: ${key} does not parse (${error instanceof Error ? error.message : String(error)}); served in English`);
        formats.set(key, englishFormat);
      }
    }
    for (const key of Object.keys(catalogue.messages)) {
      if (!englishFormats.has(key)) problems.push(`${name}: ${key} is not an English key; ignored`);
    }
    translators.set(language, buildTranslator(language, catalogue.locale, formats));
  }

  const languages = [...translators.keys()];
  const translator = (language: string) => translators.get(language) ?? translators.get(DEFAULT_LANGUAGE)!;
  return {
    languages,
    problems,
    translator,
    forAcceptLanguage: (header) => translator(negotiateLanguage(header, languages, DEFAULT_LANGUAGE)),
  };
}
