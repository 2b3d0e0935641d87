import { z } from 'zod';
import { invalidRequest } from '../oauth/errors.js';

/**
 * Parses a form body (or query) with zod. Every failure is invalid_request naming the parameter;
 * a repeated parameter arrives as an array and is refused, as RFC 6749 §3.1 requires.
 */
export function parseForm<S extends z.ZodType>(schema: S, input: unknown): z.output<S> {
  const body = input && typeof input === 'object' && !Array.isArray(input) ? (input as Record<string, unknown>) : {};
  for (const [name, value] of Object.entries(body)) {
    if (Array.isArray(value)) throw invalidRequest(`parameter ${name} was given more than once`);
  }
  const parsed = schema.safeParse(body);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  const name = issue?.path.join('.') || 'request';
  if (issue?.code === 'invalid_type' && body[name] === undefined) {
    throw invalidRequest(`parameter ${name} is missing`);
  }
  throw invalidRequest(`parameter ${name} is invalid: ${issue?.message ?? 'invalid value'}`);
}
