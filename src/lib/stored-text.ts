import { z } from 'zod';

/**
 * Text the database will store as given: no NUL (PostgreSQL's text refuses it) and no lone
 * surrogate (it would be stored as U+FFFD, not as what was sent). For fields that arrive as JSON,
 * where both are one escape away (\u0000, \ud800).
 */
// With the u flag, a surrogate range matches only a surrogate that is not half of a pair.
const LONE_SURROGATE = /[\uD800-\uDFFF]/u;

export const storedText = z
  .string()
  .refine((text) => !text.includes('\u0000'), 'must not contain a NUL character')
  .refine((text) => !LONE_SURROGATE.test(text), 'must be well-formed Unicode (no lone surrogate)');
