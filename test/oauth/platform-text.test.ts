import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PLATFORM_FIELD_LIMITS, findForbiddenCharacter } from '../../src/oauth/device/platform-text.js';
import { seedClient, startTestApp, type TestApp } from '../helpers/app.js';
import { requestDeviceCode } from '../helpers/device.js';

let t: TestApp;
let clientId: string;

beforeAll(async () => {
  t = await startTestApp();
  ({ clientId } = await seedClient(t));
});
afterAll(() => t.close());

const TEXT_FIELDS = ['platform_name', 'platform_description'] as const;

/** Every category and filler the rule names, with examples a tester would reach for first. */
const FORBIDDEN_SAMPLES = [
  '\u0000',
  '\u0007',
  '\t',
  '\n',
  '\r',
  '\u001B',
  '\u007F',
  '\u0085', // Cc
  '\u00AD',
  '\u200B',
  '\u200C',
  '\u200D',
  '\u200E',
  '\u202E',
  '\u2060',
  '\u2066',
  '\uFEFF', // Cf
  '\uE000',
  '\uF8FF',
  '\u{F0000}', // Co
  '\uD800',
  '\uDFFF', // Cs (lone surrogates)
  '\u2028', // Zl
  '\u2029', // Zp
  '\u0378',
  '\u{E0080}',
  '\uFFFF', // Cn
  '\u115F',
  '\u1160',
  '\u3164',
  '\uFFA0',
  '\u2800', // fillers that render as nothing
];

/** Visible text: letters, digits, punctuation, symbols, ordinary spaces, emoji. */
const visibleCharacter = fc.constantFrom(...'abcXYZ019 -_.,:;!?()[]/@#&+*\'"<>éüßñçÅØ日本語한국어Ωπ€£¥✓★♪🙂📺🤖'.match(/./gu)!);
const visibleText = (maxLength: number) =>
  fc
    .array(visibleCharacter, { minLength: 1, maxLength })
    .map((chars) => chars.join(''))
    .filter((s) => s.trim().length > 0);

describe('device details: platform_name, platform_description, platform_icon', () => {
  it('the character rule flags every forbidden category and filler', () => {
    for (const ch of FORBIDDEN_SAMPLES) expect(findForbiddenCharacter(`TV ${ch} box`), JSON.stringify(ch)).not.toBeNull();
  });

  it.each(TEXT_FIELDS)('%s: text with a control or invisible character anywhere is invalid_request naming the field', async (field) => {
    await fc.assert(
      fc.asyncProperty(visibleText(20), fc.constantFrom(...FORBIDDEN_SAMPLES), visibleText(20), async (before, bad, after) => {
        const res = await requestDeviceCode(t, { client_id: clientId, [field]: before + bad + after });
        expect(res.statusCode).toBe(400);
        expect(res.json().error).toBe('invalid_request');
        expect(res.json().error_description).toContain(field);
      }),
      { numRuns: 40 },
    );
  });

  it.each(TEXT_FIELDS)('%s: visible text within the limit is accepted and stored exactly, never truncated', async (field) => {
    await fc.assert(
      fc.asyncProperty(visibleText(PLATFORM_FIELD_LIMITS[field]), async (text) => {
        const res = await requestDeviceCode(t, { client_id: clientId, [field]: text });
        expect(res.statusCode, res.body).toBe(200);
        const row = await t.deps.db.selectFrom('device_requests').select(field).orderBy('request_id', 'desc').limit(1).executeTakeFirstOrThrow();
        expect(row[field]).toBe(text);
      }),
      { numRuns: 25 },
    );
  });

  it.each(TEXT_FIELDS)('%s: one character over the limit is invalid_request, not truncated', async (field) => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 1, max: 50 }), async (extra) => {
        const text = 'é'.repeat(PLATFORM_FIELD_LIMITS[field] + extra);
        const res = await requestDeviceCode(t, { client_id: clientId, [field]: text });
        expect(res.statusCode).toBe(400);
        expect(res.json().error).toBe('invalid_request');
        expect(res.json().error_description).toMatch(new RegExp(`${field} is too long`));
      }),
      { numRuns: 10 },
    );
  });

  it('the limits count characters, not bytes: exactly the limit of 4-byte emoji is accepted', async () => {
    const res = await requestDeviceCode(t, { client_id: clientId, platform_name: '📺'.repeat(PLATFORM_FIELD_LIMITS.platform_name) });
    expect(res.statusCode).toBe(200);
  });

  it.each([
    ['http://cdn.example/icon.png', 'https'],
    ['//cdn.example/icon.png', 'https'],
    ['icon.png', 'https'],
    ['javascript:alert(1)', 'https'],
    ['data:image/png;base64,AAAA', 'https'],
    ['https://user:pass@cdn.example/icon.png', 'credentials'],
    [`https://cdn.example/${'a'.repeat(2048)}`, 'too long'],
    ['https://cdn.example/\u200Bicon.png', 'invisible'],
  ])('platform_icon %s is invalid_request (%s)', async (icon, why) => {
    const res = await requestDeviceCode(t, { client_id: clientId, platform_icon: icon });
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toBe('invalid_request');
    expect(res.json().error_description).toContain('platform_icon');
    expect(res.json().error_description).toContain(why);
  });

  it('an absolute https icon URL is accepted as given', async () => {
    const icon = 'https://cdn.example/icons/tv.png?size=64';
    const res = await requestDeviceCode(t, { client_id: clientId, platform_icon: icon });
    expect(res.statusCode).toBe(200);
    const row = await t.deps.db.selectFrom('device_requests').select('platform_icon').orderBy('request_id', 'desc').limit(1).executeTakeFirstOrThrow();
    expect(row.platform_icon).toBe(icon);
  });

  it.each(TEXT_FIELDS)('%s: a blank value is invalid_request', async (field) => {
    const res = await requestDeviceCode(t, { client_id: clientId, [field]: '   ' });
    expect(res.statusCode).toBe(400);
    expect(res.json().error_description).toContain(field);
  });
});
