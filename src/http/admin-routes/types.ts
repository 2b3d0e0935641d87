import type { FastifyBaseLogger, FastifyInstance, RawReplyDefaultExpression, RawRequestDefaultExpression, RawServerDefault } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';

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
  }
}
