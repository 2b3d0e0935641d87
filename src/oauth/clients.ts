import { z } from 'zod';
import type { Database } from '../db/connect.js';
import type { ClientKind, ClientType } from '../db/schema.js';
import { randomToken, sha256 } from '../lib/random.js';
import { insertClient } from '../repositories/clients.js';
import { SUPPORTED_SCOPES } from './scopes.js';

export const CLIENT_SECRET_PREFIX = 'dacs_';

export const newClientSchema = z.object({
  name: z.string().trim().min(1).max(100),
  kind: z.enum(['tv', 'bot', 'web']),
  type: z.enum(['public', 'confidential']),
  scopes: z.array(z.enum(SUPPORTED_SCOPES)).min(1),
});

export interface CreatedClient {
  client_id: string;
  /** Shown once; only its SHA-256 hash is stored. Null for public clients. */
  client_secret: string | null;
}

/** Client secrets have 256 random bits, so a SHA-256 hash protects them at rest without argon2's cost. */
export async function createClient(
  db: Database,
  input: { name: string; kind: ClientKind; type: ClientType; scopes: string[] },
): Promise<CreatedClient> {
  const valid = newClientSchema.parse(input);
  const clientId = `${valid.kind}_${randomToken(12)}`;
  const secret = valid.type === 'confidential' ? `${CLIENT_SECRET_PREFIX}${randomToken(32)}` : null;
  await insertClient(db, {
    client_id: clientId,
    name: valid.name,
    kind: valid.kind,
    type: valid.type,
    secret_hash: secret ? sha256(secret) : null,
    allowed_scopes: [...new Set(valid.scopes)],
  });
  return { client_id: clientId, client_secret: secret };
}
