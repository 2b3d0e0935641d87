/**
 * Accept-Language (RFC 9110 §12.5.4) against the languages we have catalogues for. A browser
 * sends a handful of ranges; anything past these bounds is ignored rather than parsed, so a huge
 * header costs no more than a small one.
 */
const MAX_HEADER_LENGTH = 1024;
const MAX_RANGES = 32;
const RANGE = /^([a-z]{1,8}(?:-[a-z0-9]{1,8})*|\*)$/;
const QUALITY = /^q=(0(?:\.\d{0,3})?|1(?:\.0{0,3})?)$/;

interface LanguageRange {
  tag: string;
  quality: number;
  order: number;
}

function parseRanges(header: string): LanguageRange[] {
  const ranges: LanguageRange[] = [];
  const parts = header.slice(0, MAX_HEADER_LENGTH).split(',', MAX_RANGES);
  parts.forEach((part, order) => {
    const [rawTag = '', ...parameters] = part.split(';');
    const tag = rawTag.trim().toLowerCase();
    if (!RANGE.test(tag)) return;
    let quality = 1;
    for (const parameter of parameters) {
      const match = QUALITY.exec(parameter.trim().toLowerCase());
      if (!match) return;
      quality = Number(match[1]);
    }
    if (quality > 0) ranges.push({ tag, quality, order });
  });
  // Highest quality first; equal qualities keep the order the browser sent them in.
  return ranges.sort((a, b) => b.quality - a.quality || a.order - b.order);
}

/**
 * The first language the visitor accepts that we have: an exact tag, else its primary subtag
 * ("de-AT" is served "de"), else `fallback`. A "*" accepts the fallback.
 */
export function negotiateLanguage(header: string | undefined, available: readonly string[], fallback: string): string {
  if (!header) return fallback;
  for (const { tag } of parseRanges(header)) {
    if (tag === '*') return fallback;
    if (available.includes(tag)) return tag;
    const primary = tag.split('-')[0]!;
    if (available.includes(primary)) return primary;
  }
  return fallback;
}
