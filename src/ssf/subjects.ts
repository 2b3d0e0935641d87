import { z } from 'zod';
import type { SsfSubjectFormat } from '../db/schema.js';
import { storedText } from '../lib/stored-text.js';
import { SUBJECT_FORMATS } from './vocabulary.js';

/**
 * Subjects of SETs (SSF 1.0 §3, RFC 9493): the ones we write, in the format a stream asked for,
 * and the ones a receiver adds to or removes from its stream.
 */

/** Who a SET is about: the user, and the session (the grant) when it is about one grant. */
export interface SetSubject {
  userId: string;
  /** Null when it is no longer known (a user deleted before the event was fanned out). */
  email: string | null;
  sessionId: string | null;
}

type SubjectIdentifier = Record<string, unknown> & { format: string };

/** The user as the stream's format names one; an email that is not known falls back to iss_sub. */
function userIdentifier(format: SsfSubjectFormat, issuer: string, subject: SetSubject): SubjectIdentifier {
  if (format === 'email' && subject.email !== null) return { format: 'email', email: subject.email };
  if (format === 'opaque') return { format: 'opaque', id: subject.userId };
  return { format: 'iss_sub', iss: issuer, sub: subject.userId };
}

/**
 * A SET's sub_id. A SET about one grant (CAEP session-revoked) always names that session beside
 * the user, as a complex subject: a simple user subject would tell the receiver that every session
 * of the user ended (CAEP 1.0 §3.1). The session's id is the grant's, the `sid` of its ID tokens
 * and of introspection. Otherwise the user alone, as a complex subject if the stream asked for one.
 */
export function subjectIdentifier(format: SsfSubjectFormat, issuer: string, subject: SetSubject): SubjectIdentifier {
  const user = userIdentifier(format, issuer, subject);
  if (subject.sessionId !== null) return { format: 'complex', user, session: { format: 'opaque', id: subject.sessionId } };
  return format === 'complex' ? { format: 'complex', user } : user;
}

/** SSF 1.0 §8.1.4.1: a verification SET names the stream itself. */
export function streamSubject(streamId: string): SubjectIdentifier {
  return { format: 'opaque', id: streamId };
}

const simpleSubject = z.discriminatedUnion('format', [
  z.object({ format: z.literal('iss_sub'), iss: storedText.max(2048), sub: storedText.max(256) }),
  z.object({ format: z.literal('email'), email: storedText.max(320) }),
  z.object({ format: z.literal('opaque'), id: storedText.max(256) }),
]);

const FORMATS_TAKEN = `format must be one of ${SUBJECT_FORMATS.join(', ')}`;

/**
 * A subject a receiver adds or removes (SSF 1.0 §8.1.3): a user, simple or inside a complex
 * subject. Only users can be added or removed: a complex subject without its user is refused.
 */
export const requestedSubject = z
  .object({ format: z.enum(SUBJECT_FORMATS, { message: FORMATS_TAKEN }) })
  .passthrough()
  .pipe(
    z.union([
      simpleSubject,
      z.object({ format: z.literal('complex'), user: simpleSubject.optional() }).refine((subject) => subject.user !== undefined, {
        message: 'a complex subject must name its user: only users can be added to or removed from a stream',
        path: ['user'],
      }),
    ]),
  );

export type RequestedSubject = z.output<typeof requestedSubject>;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * Who a requested subject is, as far as it can say without the database: a user id (iss_sub of
 * this issuer, opaque), an email to look up, or nothing (another issuer's, or no id of ours).
 */
export function subjectKey(subject: RequestedSubject, issuer: string): { userId: string } | { email: string } | null {
  const user = subject.format === 'complex' ? subject.user : subject;
  if (user === undefined) return null;
  if (user.format === 'email') return { email: user.email };
  const id = user.format === 'iss_sub' ? (user.iss === issuer ? user.sub : null) : user.id;
  return id !== null && UUID.test(id) ? { userId: id.toLowerCase() } : null;
}
