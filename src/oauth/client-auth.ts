import { timingSafeEqual } from 'node:crypto';
import type { Database } from '../db/connect.js';
import type { ClientKind, ClientType } from '../db/schema.js';
import { sha256 } from '../lib/random.js';
import { findClient } from '../repositories/clients.js';
import { invalidClient, invalidRequest } from './errors.js';

export interface Client {
  clientId: string;
  name: string;
  kind: ClientKind;
  type: ClientType;
  allowedScopes: string[];
}

export interface ClientCredentials {
  /** The Authorization header, if any. */
  authorization: string | undefined;
  /** client_id from the form, if any. */
  clientId: string | undefined;
  /** client_secret from the form, if any: refused, secrets travel in HTTP Basic only. */
  clientSecret: string | undefined;
}

function decodeBasic(header: string): { id: string; secret: string } {
  const encoded = header.slice('basic '.length).trim();
  const decoded = Buffer.from(encoded, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon < 0) throw invalidClient('malformed HTTP Basic credentials');
  try {
    // RFC 6749 §2.3.1: id and secret are form-urlencoded inside the Basic credentials.
    return {
      id: decodeURIComponent(decoded.slice(0, colon).replace(/\+/g, ' ')),
      secret: decodeURIComponent(decoded.slice(colon + 1).replace(/\+/g, ' ')),
    };
  } catch {
    throw invalidClient('malformed HTTP Basic credentials');
  }
}

/**
 * RFC 6749 §2.3: confidential clients authenticate with HTTP Basic (client_secret_basic);
 * public clients identify themselves with client_id (auth method none). Secrets are compared
 * by their SHA-256 hash in constant time. A disabled app is refused.
 */
export async function authenticateClient(db: Database, credentials: ClientCredentials): Promise<Client> {
  const { authorization, clientId, clientSecret } = credentials;
  if (clientSecret !== undefined) {
    throw invalidRequest('client_secret is not accepted in the body; send client credentials with HTTP Basic');
  }
  let id: string;
  let secret: string | undefined;
  if (authorization !== undefined && /^basic /i.test(authorization)) {
    ({ id, secret } = decodeBasic(authorization));
    if (clientId !== undefined && clientId !== id) throw invalidRequest('client_id does not match the HTTP Basic credentials');
  } else if (clientId !== undefined) {
    id = clientId;
  } else {
    throw invalidClient('client authentication is required: HTTP Basic for confidential clients, client_id for public clients');
  }

  const row = id.length > 0 && id.length <= 128 ? await findClient(db, id) : undefined;
  if (!row) throw invalidClient('unknown client');
  if (row.type === 'confidential') {
    if (secret === undefined) throw invalidClient('this client is confidential and must authenticate with HTTP Basic');
    if (!row.secret_hash || !timingSafeEqual(Buffer.from(row.secret_hash), sha256(secret))) {
      throw invalidClient('client authentication failed');
    }
  } else if (secret !== undefined) {
    throw invalidClient('this client is public and has no secret');
  }
  if (row.disabled_at !== null) throw invalidClient('this app is disabled');
  return { clientId: row.client_id, name: row.name, kind: row.kind, type: row.type, allowedScopes: row.allowed_scopes };
}
