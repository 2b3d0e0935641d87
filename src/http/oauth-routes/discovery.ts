import type { FastifyInstance } from 'fastify';
import type { Deps } from '../../deps.js';
import { serverMetadata } from '../../oauth/metadata.js';

export function discoveryRoutes(app: FastifyInstance, deps: Deps): void {
  const metadata = serverMetadata(deps.config.issuer);
  const cacheable = 'public, max-age=300';
  // The same lifetime the key ring waits out before a new key signs (keys/signing-keys.ts announcementSeconds).
  const jwksCacheable = `public, max-age=${deps.config.signingKeys.jwksCacheSeconds}`;

  app.get('/.well-known/openid-configuration', async (_request, reply) => reply.header('Cache-Control', cacheable).send(metadata));
  app.get('/.well-known/oauth-authorization-server', async (_request, reply) => reply.header('Cache-Control', cacheable).send(metadata));
  app.get('/.well-known/jwks.json', async (_request, reply) => reply.header('Cache-Control', jwksCacheable).send(deps.keys.jwks()));
}
