import type { FastifyInstance } from 'fastify';
import type { Deps } from '../deps.js';
import { findStoredIcon } from '../oauth/device/platform-icons.js';

/**
 * The bytes came from a stranger's server: they are only ever an image of ours. A browser that
 * opens one as a document runs nothing and loads nothing (CSP sandbox), never guesses another
 * type (nosniff, set for every response), and no other site may embed it.
 */
const ICON_HEADERS = {
  'Content-Security-Policy': "default-src 'none'; sandbox",
  'Cross-Origin-Resource-Policy': 'same-origin',
  // Named by the SHA-256 of their bytes: whatever this address serves never changes.
  'Cache-Control': 'public, max-age=31536000, immutable',
} as const;

export function iconRoutes(app: FastifyInstance, deps: Deps): void {
  app.get<{ Params: { sha256: string } }>('/icons/:sha256', async (request, reply) => {
    const icon = await findStoredIcon(deps.db, request.params.sha256);
    if (!icon) return reply.callNotFound();
    return reply.type(icon.contentType).headers(ICON_HEADERS).send(icon.bytes);
  });
}
