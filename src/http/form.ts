import type { z } from 'zod';
import { invalidRequest, PageError } from '../oauth/errors.js';

/**
 * Parses a form body (or query) with zod; `refuse` turns the first problem into the error to throw.
 * A repeated parameter arrives as an array and is refused, as RFC 6749 §3.1 requires.
 */
function parseWith<S extends z.ZodType>(schema: S, input: unknown, refuse: (description: string) => Error): z.output<S> {
  const body = input && typeof input === 'object' && !Array.isArray(input) ? (input as Record<string, unknown>) : {};
  for (const [name, value] of Object.entries(body)) {
    if (Array.isArray(value)) throw refuse(`parameter ${name} was given more than once`);
  }
  const parsed = schema.safeParse(body);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  const name = issue?.path.join('.') || 'request';
  if (issue?.code === 'invalid_type' && body[name] === undefined) {
    throw refuse(`parameter ${name} is missing`);
  }
  throw refuse(`parameter ${name} is invalid: ${issue?.message ?? 'invalid value'}`);
}

/** For OAuth endpoints: every problem is invalid_request naming the parameter. */
export function parseForm<S extends z.ZodType>(schema: S, input: unknown): z.output<S> {
  return parseWith(schema, input, invalidRequest);
}

/** For pages: a form no page of ours would send is a 400 page, not a JSON error. */
export function parsePageForm<S extends z.ZodType>(schema: S, input: unknown): z.output<S> {
  return parseWith(schema, input, (description) => new PageError(400, 'error.bad_request', 'error.form_unreadable', { detail: description }));
}
