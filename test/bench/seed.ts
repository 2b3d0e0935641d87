import { createHash } from 'node:crypto';
import {
  AUTH_CODE_CHALLENGE,
  AUTH_CODE_SCOPES,
  benchTokenSql,
  GRANTS_PER_USER,
  OPENID_SCOPES,
  PLAIN_SCOPES,
  RS_CLIENT_ID,
  RS_CLIENT_SECRET,
  SEED,
  TV_CLIENT_ID,
  WEB_CLIENT_ID,
  WEB_REDIRECT_URI,
  type TokenKind,
} from './fixtures.js';

/**
 * Set-based seeding (INSERT ... SELECT generate_series), the same SQL on PostgreSQL and on the
 * embedded PGlite. Every row is a function of its number, so growing the 20,000-row data set to
 * 1,000,000 rows is inserting the rows from 20,000 on.
 */
export type Execute = (sql: string) => Promise<void>;

/** The network one grant in ten of the data set was asked from (a documentation AS number). */
export const CAMPAIGN_ASN = 64500;

/** Rows per statement: large enough to be set-based, small enough to show progress. */
const BATCH = 100_000;

const textArray = (items: string[]) => `'{${items.join(',')}}'::text[]`;
const scopesOf = (i: string) => `CASE WHEN (${i}) % 2 = 1 THEN ${textArray(OPENID_SCOPES)} ELSE ${textArray(PLAIN_SCOPES)} END`;
const uuidOf = (tag: string, i: string) => `md5('${SEED}:${tag}:' || (${i})::text)::uuid`;
const hashOf = (token: string) => `sha256(convert_to(${token}, 'UTF8'))`;

function clientsSql(): string {
  const secretHash = createHash('sha256').update(RS_CLIENT_SECRET).digest('hex');
  return `
    INSERT INTO clients (client_id, name, kind, type, secret_hash, allowed_scopes, introspection_allowed, grant_types, redirect_uris) VALUES
      ('${TV_CLIENT_ID}', 'Bench TV', 'tv', 'public', NULL, ${textArray(OPENID_SCOPES)}, false, ${textArray(['urn:ietf:params:oauth:grant-type:device_code', 'refresh_token'])}, '{}'::text[]),
      ('${RS_CLIENT_ID}', 'Bench resource server', 'web', 'confidential', decode('${secretHash}', 'hex'), ${textArray(OPENID_SCOPES)}, true, '{}'::text[], '{}'::text[]),
      ('${WEB_CLIENT_ID}', 'Bench web app', 'web', 'public', NULL, ${textArray(OPENID_SCOPES)}, false, ${textArray(['authorization_code', 'refresh_token'])}, ${textArray([WEB_REDIRECT_URI])})
    ON CONFLICT (client_id) DO NOTHING`;
}

/**
 * Unredeemed authorization codes [from, to) of the web app, as the authorization endpoint stores
 * them (src/oauth/authorize/decision.ts): its redirect URI, openid profile, the one S256 challenge
 * and a nonce, for a user among the first `users` (code i: user i mod users). They expire in a day
 * rather than in 5 minutes, so that none does during the run.
 */
function authorizationCodesSql(from: number, to: number, users: number): string {
  return `
    INSERT INTO authorization_codes (code_hash, client_id, user_id, redirect_uri, scopes, code_challenge, nonce, auth_time, created_at, expires_at)
    SELECT ${hashOf(benchTokenSql('authorizationCode', 'i'))}, '${WEB_CLIENT_ID}', ${uuidOf('user', `i % ${users}`)}, '${WEB_REDIRECT_URI}',
           ${textArray(AUTH_CODE_SCOPES)}, '${AUTH_CODE_CHALLENGE}', 'bench-nonce-' || i::text,
           now() - interval '5 minutes', now() - interval '1 minute', now() + interval '1 day'
    FROM generate_series(${from}::bigint, ${to - 1}::bigint) AS i`;
}

/** Pending device requests [from, to) of a kind, interval 1 s, issued an hour ago, expiring in a day. */
function deviceRequestsSql(kind: Extract<TokenKind, 'deviceCode' | 'fastDeviceCode'>, from: number, to: number): string {
  return `
    INSERT INTO device_requests (device_code_hash, user_code_hmac, client_id, scopes, platform_name, phrase,
                                 phrase_choices, status, interval_seconds, created_at, expires_at)
    SELECT ${hashOf(benchTokenSql(kind, 'i'))}, sha256(convert_to('${SEED}:uc:${kind}:' || i::text, 'UTF8')),
           '${TV_CLIENT_ID}', ${textArray(OPENID_SCOPES)}, 'Bench TV', 'brave otter',
           '{brave otter,quiet harbor,amber violin}'::text[], 'pending', 1,
           now() - interval '1 hour', now() + interval '1 day'
    FROM generate_series(${from}::bigint, ${to - 1}::bigint) AS i`;
}

/**
 * Grants [from, to): a user (shared by GRANTS_PER_USER grants), a live grant, its current
 * refresh token and one live access token. Odd grants carry openid.
 */
function grantsSql(from: number, to: number): string[] {
  const series = `generate_series(${from}::bigint, ${to - 1}::bigint) AS i`;
  const firstUser = Math.floor(from / GRANTS_PER_USER);
  const lastUser = Math.floor((to - 1) / GRANTS_PER_USER);
  return [
    `INSERT INTO users (user_id, email, password_hash, name)
     SELECT ${uuidOf('user', 'u')}, 'bench-' || u::text || '@example.test', 'not-a-password-hash', 'Bench User ' || u::text
     FROM generate_series(${firstUser}::bigint, ${lastUser}::bigint) AS u
     ON CONFLICT (user_id) DO NOTHING`,
    // Every grant carries its origin, as issued ones do (issue 31 §1): one in ten was asked from a
    // hosting network (CAMPAIGN_ASN, bulk-revoke.ts revokes those), the rest from home lines.
    `INSERT INTO grants (grant_id, user_id, client_id, scopes, platform_name, auth_time, created_at, last_used_at, expires_at,
                               current_refresh_hash, grant_type, approved_at, signed_in_ip, requester_asn, requester_network,
                               requester_country, requester_hosting)
     SELECT ${uuidOf('grant', 'i')}, ${uuidOf('user', `i / ${GRANTS_PER_USER}`)}, '${TV_CLIENT_ID}', ${scopesOf('i')}, 'Bench TV',
            now() - interval '1 day', now() - interval '1 day', now() - interval '1 hour', now() + interval '60 days',
            ${hashOf(benchTokenSql('refreshToken', 'i'))}, 'device_code', now() - interval '1 day' + (i % 86400) * interval '1 second',
            '198.51.100.' || (i % 250 + 1)::text,
            CASE WHEN i % 10 = 0 THEN ${CAMPAIGN_ASN} ELSE 7922 END,
            CASE WHEN i % 10 = 0 THEN 'Bench Hosting' ELSE 'Bench Home Lines' END,
            CASE WHEN i % 10 = 0 THEN 'KR' ELSE 'US' END,
            i % 10 = 0
     FROM ${series}`,
    `INSERT INTO refresh_tokens (token_hash, grant_id, created_at, expires_at)
     SELECT ${hashOf(benchTokenSql('refreshToken', 'i'))}, ${uuidOf('grant', 'i')}, now() - interval '1 hour', now() + interval '60 days'
     FROM ${series}`,
    `INSERT INTO access_tokens (token_hash, grant_id, user_id, client_id, scopes, created_at, expires_at)
     SELECT ${hashOf(benchTokenSql('accessToken', 'i'))}, ${uuidOf('grant', 'i')}, ${uuidOf('user', `i / ${GRANTS_PER_USER}`)}, '${TV_CLIENT_ID}', ${scopesOf('i')}, now() - interval '1 minute', now() + interval '1 day'
     FROM ${series}`,
  ];
}

export interface SeedSize {
  /** Pending device requests polled by the well-behaved pool: rows [0, pending). */
  pending: number;
  /** Live grants: rows [0, grants). */
  grants: number;
  /** Unredeemed authorization codes: rows [0, codes), each redeemable once (the auth-code scenario). */
  codes: number;
}

/**
 * Brings the data set from `from` (rows already there) to `to` rows of each kind, in batches of
 * statements that `parallel` connections run side by side. The first call also creates the three
 * clients and the codes of the slow_down variant.
 *
 * Foreign keys are not checked while seeding (session_replication_role = replica, for the
 * superuser the benchmark connects as): every reference is built from row numbers and right by
 * construction, and a million per-row checks doubled the time. Indexes are maintained as the
 * server's own inserts maintain them, so they are as large and as fragmented as in use.
 */
export async function seed(execute: Execute, from: SeedSize, to: SeedSize, fastCodes: number, progress: (line: string) => void, parallel = 1): Promise<void> {
  const statements: string[] = [];
  if (from.pending === 0 && from.grants === 0 && from.codes === 0) statements.push(clientsSql(), deviceRequestsSql('fastDeviceCode', 0, fastCodes));
  for (let start = from.pending; start < to.pending; start += BATCH) {
    statements.push(deviceRequestsSql('deviceCode', start, Math.min(to.pending, start + BATCH)));
  }
  for (let start = from.grants; start < to.grants; start += BATCH) {
    statements.push(...grantsSql(start, Math.min(to.grants, start + BATCH)));
  }
  // The codes' users are those of the grants seeded by now.
  const users = Math.ceil(to.grants / GRANTS_PER_USER);
  if (to.codes > from.codes && users === 0) throw new Error('authorization codes need users: seed grants with them');
  for (let start = from.codes; start < to.codes; start += BATCH) {
    statements.push(authorizationCodesSql(start, Math.min(to.codes, start + BATCH), users));
  }
  const total = statements.length;
  let done = 0;
  let next = 0;
  const worker = async () => {
    while (next < total) {
      const statement = statements[next++]!;
      await execute(`BEGIN; SET LOCAL session_replication_role = replica; ${statement}; COMMIT`);
      done++;
      if (done % 4 === 0 || done === total) progress(`${done}/${total} statements`);
    }
  };
  await Promise.all(Array.from({ length: parallel }, worker));
  await execute('VACUUM ANALYZE users, grants, refresh_tokens, access_tokens, device_requests, authorization_codes, clients');
  // The seed's dirty pages are written now rather than by a checkpoint in the middle of a
  // scenario: a full run once saw refresh at 1,000,000 rows stall and time out that way.
  await execute('CHECKPOINT');
}
