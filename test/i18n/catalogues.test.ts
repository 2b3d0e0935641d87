import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadCatalogues, localesFolder, Markup, messageArguments } from '../../src/i18n/catalogues.js';
import { negotiateLanguage } from '../../src/i18n/negotiate.js';

/** Issue 20 §4: every user-facing string in one catalogue per language, chosen by Accept-Language. */

interface CatalogueFile {
  name: string;
  locale: string;
  messages: Record<string, string>;
}
const readCatalogue = (file: string): CatalogueFile => JSON.parse(readFileSync(file, 'utf8'));
const english = readCatalogue(path.join(localesFolder, 'en.json'));
const shipped = readdirSync(localesFolder).filter((name) => name.endsWith('.json') && name !== 'en.json');

/** Words of a message's own text, leaving out its arguments. */
const words = (message: string) =>
  message
    .replace(/\{[^{}]*\}/g, ' ')
    .split(/\s+/)
    .filter((word) => /\p{L}/u.test(word)).length;

describe('the shipped catalogues', () => {
  it('ship English and at least one more language', () => {
    expect(shipped.length).toBeGreaterThanOrEqual(1);
    expect(loadCatalogues().languages).toEqual(['en', ...shipped.map((name) => name.replace('.json', ''))]);
  });

  it.each(shipped)('%s has every English key, no other key, and the same arguments in each message', (name) => {
    const catalogue = readCatalogue(path.join(localesFolder, name));
    const missing = Object.keys(english.messages).filter((key) => !(key in catalogue.messages));
    const unknown = Object.keys(catalogue.messages).filter((key) => !(key in english.messages));
    expect(missing, `keys missing from ${name}`).toEqual([]);
    expect(unknown, `keys in ${name} that English does not have`).toEqual([]);
    for (const [key, message] of Object.entries(catalogue.messages)) {
      expect(messageArguments(message), `${name}: ${key}`).toEqual(messageArguments(english.messages[key]!));
    }
  });

  it('load without a single problem', () => {
    expect(loadCatalogues().problems).toEqual([]);
  });

  it('a translation is a translation: no message of another language is left in English', () => {
    // Words that read the same in both languages ("Code", "Bot", "Name") are allowed; a whole
    // sentence left as it was is not.
    for (const name of shipped) {
      const catalogue = readCatalogue(path.join(localesFolder, name));
      const untranslated = Object.entries(catalogue.messages)
        .filter(([key, message]) => message === english.messages[key] && words(message) > 2)
        .map(([key]) => key);
      expect(untranslated, name).toEqual([]);
    }
  });
});

describe('a catalogue that is not complete', () => {
  const folder = mkdtempSync(path.join(tmpdir(), 'device-auth-locales-'));
  afterAll(() => rmSync(folder, { recursive: true, force: true }));
  writeFileSync(path.join(folder, 'en.json'), JSON.stringify(english));
  const { 'home.title': _dropped, ...withoutHomeTitle } = readCatalogue(path.join(localesFolder, 'de.json')).messages;
  writeFileSync(
    path.join(folder, 'de.json'),
    JSON.stringify({
      name: 'Deutsch',
      locale: 'de-DE',
      messages: {
        ...withoutHomeTitle,
        'devices.signed_out': '{application} wurde abgemeldet.',
        'apps.removed': '{app hat keinen Zugriff mehr',
        'made.up': 'Erfunden',
      },
    }),
  );
  writeFileSync(path.join(folder, 'fr.json'), '{"name": "Français"');
  const catalogues = loadCatalogues(folder);

  it('reports each missing, broken or foreign message and serves it in English; the rest stays translated', () => {
    expect(catalogues.problems).toEqual([
      'de.json: home.title is missing; served in English',
      'de.json: devices.signed_out uses {application} where English uses {app}; served in English',
      expect.stringMatching(/^de\.json: apps\.removed does not parse .*; served in English$/),
      'de.json: made.up is not an English key; ignored',
      expect.stringMatching(/^fr\.json: not a catalogue .*; not served$/),
    ]);
    const german = catalogues.translator('de');
    expect(german.t('home.title')).toBe('Home');
    expect(german.t('devices.signed_out', { app: 'TV' })).toBe('Signed out TV.');
    expect(german.t('apps.removed', { app: 'TV' })).toBe('TV no longer has access to your account.');
    expect(german.t('layout.sign_out')).toBe('Abmelden');
    expect(catalogues.languages).toEqual(['en', 'de']);
  });
});

describe('formatting a message', () => {
  const catalogues = loadCatalogues();
  const en = catalogues.translator('en');
  const de = catalogues.translator('de');

  it('plurals and selects follow each language', () => {
    expect(en.t('time.minutes_ago', { minutes: 0 })).toBe('less than a minute ago');
    expect(en.t('time.minutes_ago', { minutes: 1 })).toBe('1 minute ago');
    expect(en.t('time.minutes_ago', { minutes: 7 })).toBe('7 minutes ago');
    expect(de.t('time.minutes_ago', { minutes: 7 })).toBe('vor 7 Minuten');
    expect(en.t('approve.phrase_question', { kind: 'bot' })).toBe('Which phrase does your bot show?');
    expect(de.t('approve.phrase_question', { kind: 'device' })).toBe('Welchen Satz zeigt Ihr Gerät?');
    expect(de.country('US')).toBe('Vereinigte Staaten');
    expect(de.scope('email')).toBe('Ihre E-Mail-Adresse sehen');
    expect(de.scope('made_up_scope')).toBe('made_up_scope');
  });

  it("html() escapes every argument and the message itself; only the catalogue's own tags become markup", () => {
    const hostile = '<script>alert(1)</script> & "quotes"';
    const html = en.html('approve.requested_on_network', { ago: en.t('time.minutes_ago', { minutes: 3 }), where: hostile, network: '<b>net</b>' });
    expect(html).toBe(
      'Requested 3 minutes ago from <strong>&lt;script&gt;alert(1)&lt;/script&gt; &amp; &quot;quotes&quot;</strong> on <strong>&lt;b&gt;net&lt;/b&gt;</strong>.',
    );
    // A selector is handed over as it is, so the branch still matches.
    expect(de.html('approve.same_network', { kind: 'bot' })).toBe('Dieser Bot scheint in Ihrem Netzwerk zu sein.');
    expect(en.html('devices.waiting', { when: new Markup('<time>then</time>') })).toContain('you approved it <time>then</time>;');
    expect(en.t('layout.signed_in_as', { email: '<a@b>' })).toBe('Signed in as <a@b>');
  });
});

describe('choosing the language from Accept-Language', () => {
  const available = ['en', 'de'];
  it.each([
    [undefined, 'en'],
    ['', 'en'],
    ['de', 'de'],
    ['de-AT', 'de'],
    ['DE-ch', 'de'],
    ['fr-CH, fr;q=0.9, de;q=0.8, en;q=0.7', 'de'],
    ['en;q=0.5, de;q=0.9', 'de'],
    ['en, de', 'en'],
    ['de;q=0', 'en'],
    ['fr, *;q=0.5', 'en'],
    ['de;q=2', 'en'],
    ['de;q=abc, en', 'en'],
    ['d\u0000e', 'en'],
    ['\ud800de', 'en'],
    ['zh-Hant-TW, ja', 'en'],
    [`${'x'.repeat(1100)}, de`, 'en'],
    [`${Array.from({ length: 40 }, () => 'fr').join(',')},de`, 'en'],
  ])('%j → %s', (header, language) => {
    expect(negotiateLanguage(header, available, 'en')).toBe(language);
  });
});
