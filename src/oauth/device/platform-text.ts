import { invalidRequest } from '../errors.js';

/** Maximum lengths, in Unicode code points. Longer values are refused, never truncated. */
export const PLATFORM_FIELD_LIMITS = {
  platform_name: 64,
  platform_description: 256,
  platform_icon: 2048,
} as const;

export type PlatformField = keyof typeof PLATFORM_FIELD_LIMITS;

/**
 * Characters that are invisible or control something: controls (Cc), formats such as
 * zero-width joiners and bidi overrides (Cf), private use (Co), lone surrogates (Cs), line and
 * paragraph separators (Zl, Zp), unassigned code points (Cn), and fillers that render as
 * nothing: Hangul fillers U+115F, U+1160, U+3164, U+FFA0 and the blank Braille pattern U+2800.
 * U+FFFD stands for bytes that were not valid UTF-8.
 */
const FORBIDDEN = /[\p{Cc}\p{Cf}\p{Co}\p{Cs}\p{Zl}\p{Zp}\p{Cn}\u115F\u1160\u3164\uFFA0\u2800\uFFFD]/u;

export function findForbiddenCharacter(text: string): string | null {
  const match = FORBIDDEN.exec(text);
  if (!match) return null;
  const codePoint = match[0].codePointAt(0) ?? 0;
  return `U+${codePoint.toString(16).toUpperCase().padStart(4, '0')}`;
}

/** Validates one descriptive field; returns it unchanged or throws invalid_request naming it. */
export function validatePlatformText(field: PlatformField, value: string | undefined): string | null {
  if (value === undefined) return null;
  const forbidden = findForbiddenCharacter(value);
  if (forbidden) throw invalidRequest(`${field} contains a control or invisible character (${forbidden})`);
  const length = [...value].length;
  const limit = PLATFORM_FIELD_LIMITS[field];
  if (length > limit) throw invalidRequest(`${field} is too long: ${length} characters, at most ${limit} allowed`);
  if (value.trim().length === 0) throw invalidRequest(`${field} must not be blank`);
  return value;
}

/** The server fetches the icon (icon-fetch.ts), only over https and never with credentials. */
export function validatePlatformIcon(value: string | undefined): string | null {
  const text = validatePlatformText('platform_icon', value);
  if (text === null) return null;
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw invalidRequest('platform_icon must be an absolute https URL');
  }
  if (url.protocol !== 'https:') throw invalidRequest('platform_icon must be an absolute https URL');
  if (url.username || url.password) throw invalidRequest('platform_icon must not carry credentials');
  return text;
}
