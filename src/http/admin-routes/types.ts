import type { FastifyBaseLogger, FastifyInstance, RawReplyDefaultExpression, RawRequestDefaultExpression, RawServerDefault } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import type { Actor } from '../../events/event-log.js';

/** The admin app with zod schemas as its types. */
export type AdminApp = FastifyInstance<RawServerDefault, RawRequestDefaultExpression, RawReplyDefaultExpression, FastifyBaseLogger, ZodTypeProvider>;

/** What a change did, for the audit line written when its answer goes out. */
export interface AuditEntry {
  action: string;
  target: string;
  /** Never a secret: the handlers name what they put here. */
  details?: Record<string, unknown>;
}

declare module 'fastify' {
  interface FastifyRequest {
    audit?: AuditEntry;
    /** Who is calling the admin API and how (set by buildAdminApp before any route runs): recorded with every change's event. */
    adminActor?: Actor;
  }
}

/** The operator making this admin request, as its events record them. */
export function adminActor(request: { adminActor?: Actor }): Actor {
  if (!request.adminActor) throw new Error('the admin API names its caller before any route runs');
  return request.adminActor;
}
