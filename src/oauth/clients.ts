import { z } from 'zod';
import type { Database } from '../db/connect.js';
import type { ClientKind, ClientType } from '../db/schema.js';
import { MAX_PAGE_SIZE } from '../lib/paging.js';
import { randomToken, sha256 } from '../lib/random.js';
import { findClient, insertClient, listClients } from '../repositories/clients.js';
import { SUPPORTED_SCOPES } from './scopes.js';

export const CLIENT_SECRET_PREFIX = 'dacs_';

export const newClientSchema = z
  .object({
    name: z.string().trim().min(1).max(100),
    kind: z.enum(['tv', 'bot', 'web']),
    type: z.enum(['public', 'confidential']),
    scopes: z.array(z.enum(SUPPORTED_SCOPES)).min(1),
    /** RFC 7662 §2.1: registered as a resource server. Defaults to true exactly for a confidential web app. */
    introspection: z.boolean().optional(),
  })
  .refine((client) => !client.introspection || isResourceServerShape(client), {
    message: 'only a confidential web app can be a resource server that introspects tokens',
    path: ['introspection'],
  });

/** A TV or bot app is a device, never a resource server; a public client cannot authenticate the call. */
function isResourceServerShape(client: { kind: ClientKind; type: ClientType }): boolean {
  return client.kind === 'web' && client.type === 'confidential';
}

export interface CreatedClient {
  client_id: string;
  /** Shown once; only its SHA-256 hash is stored. Null for public clients. */
  client_secret: string | null;
  /** Whether it may introspect tokens (RFC 7662 §2.1). */
  introspection: boolean;
}

/** Client secrets have 256 random bits, so a SHA-256 hash protects them at rest without argon2's cost. */
export async function createClient(
  db: Database,
  input: { name: string; kind: ClientKind; type: ClientType; scopes: string[]; introspection?: boolean },
): Promise<CreatedClient> {
  const valid = newClientSchema.parse(input);
  const clientId = `${valid.kind}_${randomToken(12)}`;
  const secret = valid.type === 'confidential' ? `${CLIENT_SECRET_PREFIX}${randomToken(32)}` : null;
  const introspection = valid.introspection ?? isResourceServerShape(valid);
  await insertClient(db, {
    client_id: clientId,
    name: valid.name,
    kind: valid.kind,
    type: valid.type,
    secret_hash: secret ? sha256(secret) : null,
    allowed_scopes: [...new Set(valid.scopes)],
    introspection_allowed: introspection,
  });
  return { client_id: clientId, client_secret: secret, introspection };
}

/** What an operator sees of a client: never its secret's hash. */
export interface ClientView {
  client_id: string;
  name: string;
  kind: ClientKind;
  type: ClientType;
  scopes: string[];
  introspection: boolean;
  created_at: string;
  disabled: boolean;
}

function toClientView(row: Awaited<ReturnType<typeof listClients>>[number]): ClientView {
  return {
    client_id: row.client_id,
    name: row.name,
    kind: row.kind,
    type: row.type,
    scopes: row.allowed_scopes,
    introspection: row.introspection_allowed,
    created_at: row.created_at.toISOString(),
    disabled: row.disabled_at !== null,
  };
}

export async function clientPage(db: Database, page: { after?: string | undefined; limit: number }): Promise<ClientView[]> {
  return (await listClients(db, { ...page, limit: Math.min(page.limit, MAX_PAGE_SIZE) })).map(toClientView);
}

export async function showClient(db: Database, clientId: string): Promise<ClientView | undefined> {
  const row = await findClient(db, clientId);
  return row ? toClientView(row) : undefined;
}
