import type { FastifyReply } from 'fastify';

/**
 * Pages load nothing from other hosts, not even a device's icon (the server fetched it and serves
 * it from /icons: the device's host never learns who looks), cannot be framed (clickjacking) and
 * run no script.
 */
const PAGE_CSP = ["default-src 'none'", "style-src 'self'", "img-src 'self'", "form-action 'self'", "frame-ancestors 'none'", "base-uri 'none'"].join('; ');

/**
 * The page CSP for a page whose form is answered with a redirect to an app (the consent page, the
 * sign-in page on the way to it): browsers apply form-action to the redirects that follow a
 * submission, so the app's registered redirect URI's origin is added to 'self', and nothing else.
 */
export function pageCspAllowingFormsTo(redirectUri: string): string {
  const origin = new URL(redirectUri).origin;
  return PAGE_CSP.replace("form-action 'self'", `form-action 'self' ${origin}`);
}

/**
 * RFC 6797: once a browser has seen the issuer over https, it refuses plain http to that host for
 * two years, so a network attacker cannot strip TLS from a later visit (sign-in, activation).
 * No includeSubDomains or preload: both bind the operator's other hosts, which are not ours to decide.
 */
const STRICT_TRANSPORT_SECURITY = 'max-age=63072000';

/** Adds the security headers to one answer; app.ts calls it from the one onSend hook every answer passes. */
export function securityHeaders(issuer: string): (reply: FastifyReply) => void {
  // Browsers ignore the header over http (RFC 6797 §8.1); sending it there would only mislead.
  const strictTransport = issuer.startsWith('https://');
  return (reply) => {
    if (strictTransport) reply.header('Strict-Transport-Security', STRICT_TRANSPORT_SECURITY);
    reply.header('X-Content-Type-Options', 'nosniff');
    reply.header('Referrer-Policy', 'no-referrer');
    const type = String(reply.getHeader('content-type') ?? '');
    if (type.startsWith('text/html')) {
      if (!reply.hasHeader('Content-Security-Policy')) reply.header('Content-Security-Policy', PAGE_CSP);
      reply.header('X-Frame-Options', 'DENY');
      if (!reply.hasHeader('Cache-Control')) reply.header('Cache-Control', 'no-store');
    }
  };
}
