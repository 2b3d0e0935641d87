import type { FastifyInstance } from 'fastify';

/**
 * Pages load nothing from other hosts but the unverified platform icon (an https image, sent
 * without a referrer), cannot be framed (clickjacking) and run no script.
 */
export const PAGE_CSP = [
  "default-src 'none'",
  "style-src 'self'",
  "img-src 'self' https:",
  "form-action 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
].join('; ');

export function registerSecurityHeaders(app: FastifyInstance): void {
  app.addHook('onSend', (_request, reply, payload, done) => {
    reply.header('X-Content-Type-Options', 'nosniff');
    reply.header('Referrer-Policy', 'no-referrer');
    const type = String(reply.getHeader('content-type') ?? '');
    if (type.startsWith('text/html')) {
      reply.header('Content-Security-Policy', PAGE_CSP);
      reply.header('X-Frame-Options', 'DENY');
      if (!reply.hasHeader('Cache-Control')) reply.header('Cache-Control', 'no-store');
    }
    done(null, payload);
  });
}
