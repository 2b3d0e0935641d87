import { calculateJwkThumbprint, exportJWK, generateKeyPair } from 'jose';
import { Migrator, sql, type Kysely } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrations } from '../../migrations/index.js';
import { hashOpaque } from '../../src/oauth/opaque-tokens.js';
import { seedClient, startTestApp } from '../helpers/app.js';
import { createTestDatabase, type TestDatabase } from '../helpers/database.js';
import { eventsOf, introspection, refresh, refreshed, userinfo } from '../helpers/tokens.js';

const BEFORE_CURRENT_ON_LINK = '2026-11-22T01-00-00_fewer_writes_per_request';

const hash = (label: string) => Buffer.from(label.padEnd(32, '.'));
const hex = (bytes: Uint8Array | null) => (bytes ? Buffer.from(bytes).toString('hex') : null);

/** A database with no migration applied yet, and a migrator that moves it to any of ours. */
function unmigratedDatabase() {
  const state = {} as { database: TestDatabase; db: Kysely<any>; migrator: Migrator };
  beforeAll(async () => {
    state.database = await createTestDatabase({ migrated: false });
    state.db = state.database.handle.db as unknown as Kysely<any>;
    state.migrator = new Migrator({
      db: state.db,
      provider: { getMigrations: async () => migrations },
      migrationTableName: 'schema_migrations',
      migrationLockTableName: 'schema_migrations_lock',
    });
  });
  afterAll(() => state.database.drop());
  return state;
}

describe('migration 2026-11-22T02-00-00_current_refresh_token_on_link', () => {
  const state = unmigratedDatabase();

  it('moves each grant’s unreplaced token onto its row, and back down again', async () => {
    const { db, migrator } = state;
    const before = await migrator.migrateTo(BEFORE_CURRENT_ON_LINK);
    expect(before.error).toBeUndefined();
    const link = (n: number) => `00000000-0000-4000-8000-0000000000a${n}`;
    await sql`INSERT INTO users (user_id, email, password_hash) VALUES ('00000000-0000-4000-8000-000000000001', 'm@example.test', 'x')`.execute(db);
    await sql`INSERT INTO clients (client_id, name, kind, type, allowed_scopes) VALUES ('tv_m', 'M', 'tv', 'public', '{profile}')`.execute(db);
    for (const n of [1, 2]) {
      await sql`INSERT INTO device_links (link_id, user_id, client_id, scopes, auth_time, created_at, last_used_at, expires_at)
                VALUES (${link(n)}, '00000000-0000-4000-8000-000000000001', 'tv_m', '{profile}', now(), now(), now(), now() + interval '1 day')`.execute(db);
    }
    await sql`INSERT INTO refresh_tokens (token_hash, link_id, created_at, expires_at, replaced_at) VALUES
                (${hash('old')}, ${link(1)}, now() - interval '2 hours', now() + interval '1 day', now() - interval '1 hour'),
                (${hash('current')}, ${link(1)}, now() - interval '1 hour', now() + interval '1 day', NULL)`.execute(db);

    // Up to this migration only: later ones rename what this test reads (2026-11-24T07-00-00).
    const up = await migrator.migrateTo('2026-11-22T02-00-00_current_refresh_token_on_link');
    expect(up.error).toBeUndefined();
    const links = await sql<{ link_id: string; current_refresh_hash: Uint8Array | null }>`
      SELECT link_id::text, current_refresh_hash FROM device_links ORDER BY link_id`.execute(db);
    expect(links.rows.map((l) => [l.link_id.slice(-2), hex(l.current_refresh_hash)])).toEqual([
      ['a1', hex(hash('current'))],
      // A grant that never had a refresh token names none.
      ['a2', null],
    ]);
    const columns = await sql<{ column_name: string }>`
      SELECT column_name FROM information_schema.columns WHERE table_name = 'refresh_tokens' ORDER BY column_name`.execute(db);
    expect(columns.rows.map((c) => c.column_name)).toEqual(['created_at', 'expires_at', 'link_id', 'token_hash']);

    const down = await migrator.migrateTo(BEFORE_CURRENT_ON_LINK);
    expect(down.error).toBeUndefined();
    const tokens = await sql<{ token_hash: Uint8Array; replaced: boolean }>`
      SELECT token_hash, replaced_at IS NOT NULL AS replaced FROM refresh_tokens ORDER BY created_at`.execute(db);
    expect(tokens.rows.map((r) => [hex(r.token_hash), r.replaced])).toEqual([
      [hex(hash('old')), true],
      [hex(hash('current')), false],
    ]);
    // The partial unique index is back: a second current token on the grant is refused.
    await expect(
      sql`INSERT INTO refresh_tokens (token_hash, link_id, created_at, expires_at)
          VALUES (${hash('another')}, ${link(1)}, now(), now() + interval '1 day')`.execute(db),
    ).rejects.toThrow(/refresh_tokens_one_current_per_link/);
  });
});

describe('migration 2026-11-22T03-00-00_access_tokens_name_their_user_and_app', () => {
  const BEFORE = '2026-11-22T02-00-00_current_refresh_token_on_link';
  const USER = '00000000-0000-4000-8000-000000000002';
  const link = (n: number) => `00000000-0000-4000-8000-0000000000b${n}`;
  const state = unmigratedDatabase();

  it('copies each live grant’s user and app onto its access tokens, drops those of revoked grants, and goes back down', async () => {
    const { db, migrator } = state;
    expect((await migrator.migrateTo(BEFORE)).error).toBeUndefined();
    await sql`INSERT INTO users (user_id, email, password_hash) VALUES (${USER}, 'n@example.test', 'x')`.execute(db);
    await sql`INSERT INTO clients (client_id, name, kind, type, allowed_scopes) VALUES ('tv_n', 'N', 'tv', 'public', '{profile}')`.execute(db);
    for (const [n, revokedAt] of [
      [1, null],
      [2, new Date()],
    ] as const) {
      await sql`INSERT INTO device_links (link_id, user_id, client_id, scopes, auth_time, created_at, last_used_at, expires_at, revoked_at)
                VALUES (${link(n)}, ${USER}, 'tv_n', '{profile}', now(), now(), now(), now() + interval '1 day', ${revokedAt})`.execute(db);
      await sql`INSERT INTO access_tokens (token_hash, link_id, scopes, created_at, expires_at)
                VALUES (${hash(`at${n}`)}, ${link(n)}, '{profile}', now(), now() + interval '1 hour')`.execute(db);
    }

    expect((await migrator.migrateTo('2026-11-22T03-00-00_access_tokens_name_their_user_and_app')).error).toBeUndefined();
    const tokens = await sql<{ token_hash: Uint8Array; user_id: string; client_id: string }>`
      SELECT token_hash, user_id::text, client_id FROM access_tokens`.execute(db);
    expect(tokens.rows.map((r) => [hex(r.token_hash), r.user_id, r.client_id])).toEqual([[hex(hash('at1')), USER, 'tv_n']]);
    // Both copies are required from now on.
    await expect(
      sql`INSERT INTO access_tokens (token_hash, link_id, scopes, created_at, expires_at)
          VALUES (${hash('no-user')}, ${link(1)}, '{profile}', now(), now() + interval '1 hour')`.execute(db),
    ).rejects.toThrow(/user_id/);

    expect((await migrator.migrateTo(BEFORE)).error).toBeUndefined();
    const columns = await sql<{ column_name: string }>`
      SELECT column_name FROM information_schema.columns WHERE table_name = 'access_tokens' ORDER BY column_name`.execute(db);
    expect(columns.rows.map((c) => c.column_name)).toEqual(['created_at', 'expires_at', 'link_id', 'scopes', 'token_hash']);
    expect((await sql<{ n: number }>`SELECT count(*)::int AS n FROM access_tokens`.execute(db)).rows[0]!.n).toBe(1);
  });
});

describe('migration 2026-11-22T04-00-00_one_request_per_user_code', () => {
  const BEFORE = '2026-11-22T03-00-00_access_tokens_name_their_user_and_app';
  const state = unmigratedDatabase();
  const insertRequest = (db: Kysely<any>, label: string, userCode: string, status: string) =>
    sql`INSERT INTO device_requests (device_code_hash, user_code_hmac, client_id, scopes, phrase, phrase_choices, status,
                                     interval_seconds, created_at, expires_at)
        VALUES (${hash(label)}, ${hash(userCode)}, 'tv_u', '{profile}', 'AmberFalcon', '{AmberFalcon,QuietHarbor,BraveOtter}',
                ${status}, 5, now(), now() + interval '10 minutes')`.execute(db);
  const userCodes = async (db: Kysely<any>) =>
    (
      await sql<{ device_code_hash: Uint8Array; user_code_hmac: Uint8Array }>`
      SELECT device_code_hash, user_code_hmac FROM device_requests ORDER BY request_id`.execute(db)
    ).rows.map((r) => [hex(r.device_code_hash), hex(r.user_code_hmac)]);

  it('leaves a code drawn twice with its newest request, makes codes unique, and goes back down', async () => {
    const { db, migrator } = state;
    expect((await migrator.migrateTo(BEFORE)).error).toBeUndefined();
    await sql`INSERT INTO clients (client_id, name, kind, type, allowed_scopes) VALUES ('tv_u', 'U', 'tv', 'public', '{profile}')`.execute(db);
    // The old rule let a code come back once its request was no longer pending.
    await insertRequest(db, 'first', 'shared', 'denied');
    await insertRequest(db, 'second', 'shared', 'pending');
    await insertRequest(db, 'other', 'own', 'approved');

    expect((await migrator.migrateToLatest()).error).toBeUndefined();
    const [first, second, other] = await userCodes(db);
    expect(second).toEqual([hex(hash('second')), hex(hash('shared'))]);
    expect(other).toEqual([hex(hash('other')), hex(hash('own'))]);
    expect(first![0]).toBe(hex(hash('first')));
    expect(first![1]).not.toBe(hex(hash('shared')));
    // Now a code is unique among kept requests, whatever their status.
    await expect(insertRequest(db, 'third', 'own', 'pending')).rejects.toThrow(/device_requests_one_per_user_code/);

    expect((await migrator.migrateTo(BEFORE)).error).toBeUndefined();
    // Down: only pending codes are unique again.
    await insertRequest(db, 'third', 'own', 'pending');
    await expect(insertRequest(db, 'fourth', 'own', 'pending')).rejects.toThrow(/device_requests_live_user_code/);
  });
});

describe('migration 2026-11-23T00-00-00_banned_users_keep_no_access_tokens', () => {
  const BEFORE = '2026-11-22T04-00-00_one_request_per_user_code';
  const user = (n: number) => `00000000-0000-4000-8000-00000000000${n}`;
  const link = (n: number) => `00000000-0000-4000-8000-0000000000c${n}`;
  const state = unmigratedDatabase();

  it('deletes the access tokens of banned users, which the live-token check no longer looks up, and keeps the rest', async () => {
    const { db, migrator } = state;
    expect((await migrator.migrateTo(BEFORE)).error).toBeUndefined();
    await sql`INSERT INTO clients (client_id, name, kind, type, allowed_scopes) VALUES ('tv_b', 'B', 'tv', 'public', '{profile}')`.execute(db);
    for (const [n, bannedAt] of [
      [1, null],
      [2, new Date()],
    ] as const) {
      await sql`INSERT INTO users (user_id, email, password_hash, banned_at) VALUES (${user(n)}, ${`b${n}@example.test`}, 'x', ${bannedAt})`.execute(db);
      await sql`INSERT INTO device_links (link_id, user_id, client_id, scopes, auth_time, created_at, last_used_at, expires_at)
                VALUES (${link(n)}, ${user(n)}, 'tv_b', '{profile}', now(), now(), now(), now() + interval '1 day')`.execute(db);
      await sql`INSERT INTO access_tokens (token_hash, link_id, user_id, client_id, scopes, created_at, expires_at)
                VALUES (${hash(`bt${n}`)}, ${link(n)}, ${user(n)}, 'tv_b', '{profile}', now(), now() + interval '1 hour')`.execute(db);
    }
    const tokens = async () =>
      (await sql<{ token_hash: Uint8Array }>`SELECT token_hash FROM access_tokens ORDER BY token_hash`.execute(db)).rows.map((r) => hex(r.token_hash));

    expect((await migrator.migrateToLatest()).error).toBeUndefined();
    expect(await tokens()).toEqual([hex(hash('bt1'))]);

    expect((await migrator.migrateTo(BEFORE)).error).toBeUndefined();
    expect(await tokens()).toEqual([hex(hash('bt1'))]);
  });
});

describe('migration 2026-11-23T12-00-00_device_requests_do_not_lock_their_app', () => {
  const BEFORE = '2026-11-23T00-00-00_banned_users_keep_no_access_tokens';
  const state = unmigratedDatabase();
  const insertRequest = (db: Kysely<any>, label: string, clientId: string) =>
    sql`INSERT INTO device_requests (device_code_hash, user_code_hmac, client_id, scopes, phrase, phrase_choices,
                                     interval_seconds, created_at, expires_at)
        VALUES (${hash(label)}, ${hash(label)}, ${clientId}, '{profile}', 'AmberFalcon', '{AmberFalcon,QuietHarbor,BraveOtter}',
                5, now(), now() + interval '10 minutes')`.execute(db);
  const requestsByApp = async (db: Kysely<any>) =>
    (await sql<{ client_id: string }>`SELECT client_id FROM device_requests ORDER BY request_id`.execute(db)).rows.map((r) => r.client_id);
  const issuanceLocks = async (db: Kysely<any>) =>
    (
      await sql<{ n: number }>`
      SELECT count(*)::int AS n FROM pg_constraint WHERE conrelid = 'device_requests'::regclass AND confrelid = 'clients'::regclass`.execute(db)
    ).rows[0]!.n;

  it('drops the key that locked the app on every issuance, still deletes an app’s requests with it, and goes back down', async () => {
    const { db, migrator } = state;
    expect((await migrator.migrateTo(BEFORE)).error).toBeUndefined();
    await sql`INSERT INTO clients (client_id, name, kind, type, allowed_scopes) VALUES
                ('tv_kept', 'Kept', 'tv', 'public', '{profile}'), ('tv_gone', 'Gone', 'tv', 'public', '{profile}'),
                ('tv_later', 'Later', 'tv', 'public', '{profile}')`.execute(db);
    expect(await issuanceLocks(db)).toBe(1);

    expect((await migrator.migrateToLatest()).error).toBeUndefined();
    expect(await issuanceLocks(db)).toBe(0);
    await insertRequest(db, 'kept', 'tv_kept');
    await insertRequest(db, 'gone-1', 'tv_gone');
    await insertRequest(db, 'gone-2', 'tv_gone');
    await sql`DELETE FROM clients WHERE client_id = 'tv_gone'`.execute(db);
    expect(await requestsByApp(db)).toEqual(['tv_kept']);

    // A request left behind by an issuance that raced its app's deletion: the way down drops it.
    await insertRequest(db, 'orphan', 'tv_gone');
    await insertRequest(db, 'later', 'tv_later');
    expect((await migrator.migrateTo(BEFORE)).error).toBeUndefined();
    expect(await requestsByApp(db)).toEqual(['tv_kept', 'tv_later']);
    expect(await issuanceLocks(db)).toBe(1);
    await expect(insertRequest(db, 'unknown', 'tv_gone')).rejects.toThrow(/device_requests_client_id_fkey/);
    await sql`DELETE FROM clients WHERE client_id = 'tv_later'`.execute(db);
    expect(await requestsByApp(db)).toEqual(['tv_kept']);
  });
});

describe('migration 2026-11-23T13-00-00_chain_rows_do_not_recheck_their_link', () => {
  const BEFORE = '2026-11-23T12-00-00_device_requests_do_not_lock_their_app';
  const state = unmigratedDatabase();
  const user = (n: number) => `00000000-0000-4000-8000-00000000001${n}`;
  const link = (n: number) => `00000000-0000-4000-8000-0000000000d${n}`;
  /** A grant of `clientId` for user n: its device_links row, a refresh token, an access token and an event. */
  const insertChain = async (db: Kysely<any>, n: number, clientId: string, userN = n) => {
    await sql`INSERT INTO device_links (link_id, user_id, client_id, scopes, auth_time, created_at, last_used_at, expires_at)
              VALUES (${link(n)}, ${user(userN)}, ${clientId}, '{profile}', now(), now(), now(), now() + interval '1 day')`.execute(db);
    await insertChainRows(db, n, clientId, userN);
  };
  const insertChainRows = async (db: Kysely<any>, n: number, clientId: string, userN = n) => {
    await sql`INSERT INTO refresh_tokens (token_hash, link_id, created_at, expires_at)
              VALUES (${hash(`rt${n}`)}, ${link(n)}, now(), now() + interval '1 day')`.execute(db);
    await sql`INSERT INTO access_tokens (token_hash, link_id, user_id, client_id, scopes, created_at, expires_at)
              VALUES (${hash(`at${n}`)}, ${link(n)}, ${user(userN)}, ${clientId}, '{profile}', now(), now() + interval '1 hour')`.execute(db);
    await sql`INSERT INTO link_events (link_id, user_id, client_id, event, created_at)
              VALUES (${link(n)}, ${user(userN)}, ${clientId}, 'issued', now())`.execute(db);
  };
  /** For each table, the grants (by number) that have rows in it. */
  const rowsByChain = async (db: Kysely<any>) => {
    const of = async (table: string) =>
      (await sql<{ link_id: string }>`SELECT DISTINCT link_id::text FROM ${sql.table(table)} ORDER BY 1`.execute(db)).rows.map((r) =>
        Number(r.link_id.slice(-1)),
      );
    return { refresh: await of('refresh_tokens'), access: await of('access_tokens'), events: await of('link_events') };
  };
  const keysToLinks = async (db: Kysely<any>) =>
    (
      await sql<{ n: number }>`
      SELECT count(*)::int AS n FROM pg_constraint WHERE confrelid = 'device_links'::regclass
        AND conrelid IN ('refresh_tokens'::regclass, 'access_tokens'::regclass, 'link_events'::regclass)`.execute(db)
    ).rows[0]!.n;

  it('drops the keys that looked a written grant up again, still deletes a grant’s rows with it, and goes back down', async () => {
    const { db, migrator } = state;
    expect((await migrator.migrateTo(BEFORE)).error).toBeUndefined();
    for (const n of [1, 2, 3, 4, 5]) {
      await sql`INSERT INTO users (user_id, email, password_hash) VALUES (${user(n)}, ${`d${n}@example.test`}, 'x')`.execute(db);
    }
    await sql`INSERT INTO clients (client_id, name, kind, type, allowed_scopes) VALUES
                ('tv_d', 'D', 'tv', 'public', '{profile}'), ('tv_gone', 'Gone', 'tv', 'public', '{profile}')`.execute(db);
    expect(await keysToLinks(db)).toBe(3);

    expect((await migrator.migrateTo('2026-11-23T13-00-00_chain_rows_do_not_recheck_their_link')).error).toBeUndefined();
    expect(await keysToLinks(db)).toBe(0);
    for (const n of [1, 2, 3]) await insertChain(db, n, 'tv_d');
    await insertChain(db, 4, 'tv_gone');
    // The purge deletes ended grants; their rows go with them, in one statement for several.
    await sql`DELETE FROM device_links WHERE link_id IN (${link(1)}, ${link(2)})`.execute(db);
    expect(await rowsByChain(db)).toEqual({ refresh: [3, 4], access: [3, 4], events: [3, 4] });
    // So they do when a deleted user or app takes its grants with it (the keys that remain cascade).
    await sql`DELETE FROM users WHERE user_id = ${user(3)}`.execute(db);
    await sql`DELETE FROM clients WHERE client_id = 'tv_gone'`.execute(db);
    expect(await rowsByChain(db)).toEqual({ refresh: [], access: [], events: [] });

    // Rows whose grant is gone (none can be left by the server; written here by hand): the way down drops them.
    await insertChain(db, 5, 'tv_d');
    await insertChainRows(db, 1, 'tv_d', 5);
    expect((await migrator.migrateTo(BEFORE)).error).toBeUndefined();
    expect(await rowsByChain(db)).toEqual({ refresh: [5], access: [5], events: [5] });
    expect(await keysToLinks(db)).toBe(3);
    await expect(insertChainRows(db, 1, 'tv_d', 5)).rejects.toThrow(/refresh_tokens_link_id_fkey/);
  });
});

describe('migration 2026-11-24T00-00-00_introspection_is_a_permission', () => {
  const BEFORE = '2026-11-23T13-00-00_chain_rows_do_not_recheck_their_link';
  const state = unmigratedDatabase();
  const permissions = async (db: Kysely<any>) =>
    (
      await sql<{ client_id: string; introspection_allowed: boolean }>`
      SELECT client_id, introspection_allowed FROM clients ORDER BY client_id`.execute(db)
    ).rows.map((r) => [r.client_id, r.introspection_allowed]);

  it('lets the confidential web apps introspect and no other app, forbids the permission to tv, bot and public apps, and goes back down', async () => {
    const { db, migrator } = state;
    expect((await migrator.migrateTo(BEFORE)).error).toBeUndefined();
    await sql`INSERT INTO clients (client_id, name, kind, type, allowed_scopes, secret_hash) VALUES
                ('bot_i', 'Bot', 'bot', 'confidential', '{profile}', ${hash('b')}),
                ('tv_i', 'TV', 'tv', 'public', '{profile}', NULL),
                ('web_i', 'Resource server', 'web', 'confidential', '{profile}', ${hash('w')}),
                ('web_p', 'Public web', 'web', 'public', '{profile}', NULL)`.execute(db);

    expect((await migrator.migrateToLatest()).error).toBeUndefined();
    expect(await permissions(db)).toEqual([
      ['bot_i', false],
      ['tv_i', false],
      ['web_i', true],
      ['web_p', false],
    ]);
    for (const clientId of ['bot_i', 'tv_i', 'web_p']) {
      await expect(sql`UPDATE clients SET introspection_allowed = true WHERE client_id = ${clientId}`.execute(db)).rejects.toThrow(
        /clients_introspection_only_confidential_web/,
      );
    }
    // A new app may introspect only when registered so.
    await sql`INSERT INTO clients (client_id, name, kind, type, allowed_scopes, secret_hash)
              VALUES ('web_new', 'New', 'web', 'confidential', '{profile}', ${hash('n')})`.execute(db);
    expect(await permissions(db)).toContainEqual(['web_new', false]);

    expect((await migrator.migrateTo(BEFORE)).error).toBeUndefined();
    const columns = await sql<{ column_name: string }>`
      SELECT column_name FROM information_schema.columns WHERE table_name = 'clients' AND column_name = 'introspection_allowed'`.execute(db);
    expect(columns.rows).toEqual([]);
  });
});

describe('migration 2026-11-24T02-00-00_client_changes_are_announced', () => {
  const BEFORE = '2026-11-24T01-00-00_a_rotated_secret_may_overlap';
  const state = unmigratedDatabase();
  const announcing = async (db: Kysely<any>) =>
    (
      await sql<{ tgname: string; proname: string }>`
      SELECT t.tgname, p.proname FROM pg_trigger t JOIN pg_proc p ON p.oid = t.tgfoid
      WHERE t.tgrelid = 'clients'::regclass AND t.tgname = 'clients_changes_are_announced'`.execute(db)
    ).rows;

  it('adds the trigger that announces each updated or deleted client, and goes back down without a trace', async () => {
    const { db, migrator } = state;
    expect((await migrator.migrateTo(BEFORE)).error).toBeUndefined();
    expect(await announcing(db)).toEqual([]);
    expect((await migrator.migrateToLatest()).error).toBeUndefined();
    expect(await announcing(db)).toEqual([{ tgname: 'clients_changes_are_announced', proname: 'announce_client_change' }]);

    expect((await migrator.migrateTo(BEFORE)).error).toBeUndefined();
    expect(await announcing(db)).toEqual([]);
    const functions = await sql`SELECT 1 FROM pg_proc WHERE proname = 'announce_client_change'`.execute(db);
    expect(functions.rows).toEqual([]);
  });
});

describe('migration 2026-11-24T06-00-00_what_an_app_may_do_is_registered', () => {
  const state = unmigratedDatabase();

  it('registers for each existing app exactly the grant types its kind had, refuses unknown grant types, and goes back down', async () => {
    const { db, migrator } = state;
    expect((await migrator.migrateTo('2026-11-24T05-00-00_decisions_record_where_both_sides_were')).error).toBeUndefined();
    await sql`INSERT INTO clients (client_id, name, kind, type, allowed_scopes, secret_hash) VALUES
                ('tv_g', 'TV', 'tv', 'public', '{profile}', NULL),
                ('bot_g', 'Bot', 'bot', 'confidential', '{profile}', ${hash('bot')}),
                ('web_g', 'Web', 'web', 'confidential', '{profile}', ${hash('web')})`.execute(db);

    expect((await migrator.migrateTo('2026-11-24T06-00-00_what_an_app_may_do_is_registered')).error).toBeUndefined();
    const rows = await sql<{ client_id: string; grant_types: string[]; redirect_uris: string[] }>`
      SELECT client_id, grant_types, redirect_uris FROM clients ORDER BY client_id`.execute(db);
    const device = 'urn:ietf:params:oauth:grant-type:device_code';
    expect(rows.rows).toEqual([
      { client_id: 'bot_g', grant_types: [device, 'refresh_token'], redirect_uris: [] },
      { client_id: 'tv_g', grant_types: [device, 'refresh_token'], redirect_uris: [] },
      { client_id: 'web_g', grant_types: [device], redirect_uris: [] },
    ]);
    // A row that does not say gets nothing; a grant type nobody knows is refused.
    await sql`INSERT INTO clients (client_id, name, kind, type, allowed_scopes) VALUES ('tv_new', 'New', 'tv', 'public', '{profile}')`.execute(db);
    const added = await sql<{ grant_types: string[] }>`SELECT grant_types FROM clients WHERE client_id = 'tv_new'`.execute(db);
    expect(added.rows[0]!.grant_types).toEqual([]);
    await expect(sql`UPDATE clients SET grant_types = '{implicit}' WHERE client_id = 'tv_g'`.execute(db)).rejects.toThrow(/clients_grant_types_known/);

    expect((await migrator.migrateTo('2026-11-24T05-00-00_decisions_record_where_both_sides_were')).error).toBeUndefined();
    const columns = await sql<{ column_name: string }>`
      SELECT column_name FROM information_schema.columns WHERE table_name = 'clients' AND column_name IN ('grant_types', 'redirect_uris')`.execute(db);
    expect(columns.rows).toEqual([]);
  });
});

describe('migration 2026-11-24T07-00-00_a_chain_is_a_grant', () => {
  const BEFORE = '2026-11-24T06-00-00_what_an_app_may_do_is_registered';
  const USER = '00000000-0000-4000-8000-000000000021';
  const grant = (n: number) => `00000000-0000-4000-8000-0000000000e${n}`;
  const accessToken = (n: number) => `da_at_issued-before-the-rename-${n}`;
  const refreshToken = (n: number) => `da_rt_issued-before-the-rename-${n}`;
  const state = unmigratedDatabase();
  /** A device link as the server wrote it before the rename: a current refresh token, an access token, its event and request. */
  const insertDeviceLink = async (db: Kysely<any>, n: number) => {
    await sql`INSERT INTO device_links (link_id, user_id, client_id, scopes, platform_name, auth_time, created_at, last_used_at, expires_at, current_refresh_hash)
              VALUES (${grant(n)}, ${USER}, 'tv_r', '{openid,profile,offline_access}', 'Living Room TV', now(), now(), now(), now() + interval '30 days',
                      ${hashOpaque(refreshToken(n))})`.execute(db);
    await sql`INSERT INTO refresh_tokens (token_hash, link_id, created_at, expires_at)
              VALUES (${hashOpaque(refreshToken(n))}, ${grant(n)}, now(), now() + interval '30 days')`.execute(db);
    await sql`INSERT INTO access_tokens (token_hash, link_id, user_id, client_id, scopes, created_at, expires_at)
              VALUES (${hashOpaque(accessToken(n))}, ${grant(n)}, ${USER}, 'tv_r', '{openid,profile,offline_access}', now(), now() + interval '1 hour')`.execute(
      db,
    );
    await sql`INSERT INTO link_events (link_id, user_id, client_id, event, client_ip, created_at)
              VALUES (${grant(n)}, ${USER}, 'tv_r', 'issued', '203.0.113.9', now())`.execute(db);
    await sql`INSERT INTO device_requests (device_code_hash, user_code_hmac, client_id, scopes, phrase, phrase_choices, status,
                                           interval_seconds, created_at, expires_at, user_id, auth_time, decided_at, link_id)
              VALUES (${hash(`request${n}`)}, ${hash(`code${n}`)}, 'tv_r', '{openid,profile,offline_access}', 'AmberFalcon',
                      '{AmberFalcon,QuietHarbor,BraveOtter}', 'redeemed', 5, now(), now() + interval '10 minutes', ${USER}, now(), now(), ${grant(n)})`.execute(
      db,
    );
  };
  const rowsOf = async (db: Kysely<any>, n: number) => {
    const count = async (table: string) =>
      (await sql<{ n: number }>`SELECT count(*)::int AS n FROM ${sql.table(table)} WHERE grant_id = ${grant(n)}`.execute(db)).rows[0]!.n;
    return { refresh: await count('refresh_tokens'), access: await count('access_tokens'), events: await count('events') };
  };
  const tables = async (db: Kysely<any>) =>
    (
      await sql<{ table_name: string }>`
      SELECT table_name FROM information_schema.columns
      WHERE column_name IN ('link_id', 'grant_id') AND table_schema = 'public' ORDER BY table_name, column_name`.execute(db)
    ).rows.map((r) => r.table_name);
  const columnsNamed = async (db: Kysely<any>, column: string) =>
    (await sql<{ n: number }>`SELECT count(*)::int AS n FROM information_schema.columns WHERE column_name = ${column} AND table_schema = 'public'`.execute(db))
      .rows[0]!.n;
  const trigger = async (db: Kysely<any>) =>
    (
      await sql<{ table: string; tgname: string; proname: string }>`
      SELECT t.tgrelid::regclass::text AS table, t.tgname, p.proname FROM pg_trigger t JOIN pg_proc p ON p.oid = t.tgfoid
      WHERE t.tgname LIKE '%delete_their_rows'`.execute(db)
    ).rows;

  it('renames device links to grants; tokens issued before still introspect, answer userinfo and rotate; a deleted grant takes its rows; and goes back down', async () => {
    const { db, migrator } = state;
    expect((await migrator.migrateTo(BEFORE)).error).toBeUndefined();
    await sql`INSERT INTO users (user_id, email, password_hash, name) VALUES (${USER}, 'r@example.test', 'x', 'Rename Reader')`.execute(db);
    await sql`INSERT INTO clients (client_id, name, kind, type, allowed_scopes, grant_types) VALUES
                ('tv_r', 'R', 'tv', 'public', '{openid,profile,email,offline_access}',
                 '{urn:ietf:params:oauth:grant-type:device_code,refresh_token}')`.execute(db);
    for (const n of [1, 2]) await insertDeviceLink(db, n);

    expect((await migrator.migrateTo('2026-11-24T07-00-00_a_chain_is_a_grant')).error).toBeUndefined();
    expect(await tables(db)).toEqual(['access_tokens', 'device_requests', 'grant_events', 'grants', 'refresh_tokens']);
    expect(await columnsNamed(db, 'link_id')).toBe(0);
    expect(await trigger(db)).toEqual([{ table: 'grants', tgname: 'grants_delete_their_rows', proname: 'delete_rows_of_deleted_grants' }]);
    const request = await sql<{ grant_id: string }>`SELECT grant_id::text FROM device_requests WHERE device_code_hash = ${hash('request1')}`.execute(db);
    expect(request.rows).toEqual([{ grant_id: grant(1) }]);

    // The server as it is now, on the renamed tables (and the later migrations it needs, such as
    // sealed keys and DPoP's key columns, as a deployed server migrates on start): the tokens
    // issued before the rename work.
    expect((await migrator.migrateToLatest()).error).toBeUndefined();
    const t = await startTestApp({ database: state.database });
    try {
      const rs = await seedClient(t, { kind: 'web', type: 'confidential', name: 'Photo API', introspection: true });
      expect(await introspection(t, rs, accessToken(1))).toMatchObject({ active: true, sub: USER, client_id: 'tv_r' });
      const info = await userinfo(t, accessToken(1));
      expect(info.statusCode, info.body).toBe(200);
      expect(info.json()).toMatchObject({ sub: USER, name: 'Rename Reader' });
      const tv = { clientId: 'tv_r', clientSecret: null };
      const rotated = await refreshed(t, tv, refreshToken(1));
      expect(await introspection(t, rs, rotated.access_token)).toMatchObject({ active: true, sub: USER });
      expect((await eventsOf(t, grant(1))).map((e) => e.type)).toEqual(['grant.issued', 'grant.rotated']);
      // The refresh token replaced by that rotation is still known as the grant's: presented again
      // after the retry window, it revokes the grant.
      t.clock.advance(t.config.refreshRetryWindow + 1);
      expect((await refresh(t, tv, refreshToken(1))).json().error).toBe('invalid_grant');
      expect(await introspection(t, rs, rotated.access_token)).toEqual({ active: false });
      // The other grant is untouched.
      expect(await introspection(t, rs, accessToken(2))).toMatchObject({ active: true, sub: USER });
    } finally {
      await t.close();
    }

    // The trigger made anew still deletes a grant's tokens with it; since the one event log
    // (2026-11-26T14-00-00) its events stay, until EVENT_RETENTION_DAYS.
    expect(await rowsOf(db, 2)).toEqual({ refresh: 1, access: 1, events: 1 });
    await sql`DELETE FROM grants WHERE grant_id = ${grant(2)}`.execute(db);
    expect(await rowsOf(db, 2)).toEqual({ refresh: 0, access: 0, events: 1 });

    expect((await migrator.migrateTo(BEFORE)).error).toBeUndefined();
    expect(await tables(db)).toEqual(['access_tokens', 'device_links', 'device_requests', 'link_events', 'refresh_tokens']);
    expect(await columnsNamed(db, 'grant_id')).toBe(0);
    expect(await trigger(db)).toEqual([{ table: 'device_links', tgname: 'device_links_delete_their_rows', proname: 'delete_rows_of_deleted_links' }]);
    // The old names work again, the trigger included.
    await sql`DELETE FROM device_links WHERE link_id = ${grant(1)}`.execute(db);
    const left = await sql<{ n: number }>`
      SELECT (SELECT count(*) FROM refresh_tokens) + (SELECT count(*) FROM access_tokens) + (SELECT count(*) FROM link_events) AS n`.execute(db);
    expect(Number(left.rows[0]!.n)).toBe(0);
  });
});

describe('migration 2026-11-24T09-30-00_dpop_binds_tokens_to_a_key', () => {
  const state = unmigratedDatabase();
  const BEFORE_DPOP = '2026-11-24T09-00-00_signing_keys_rotate_and_are_sealed';
  const dpopColumns = async (db: Kysely<any>) =>
    (
      await sql<{ table_name: string; column_name: string }>`
        SELECT table_name, column_name FROM information_schema.columns
        WHERE column_name IN ('dpop_jkt', 'require_dpop') ORDER BY table_name`.execute(db)
    ).rows.map((r) => `${r.table_name}.${r.column_name}`);

  it('leaves every existing app unrequired and every row unbound, records each proof once, and goes back down', async () => {
    const { db, migrator } = state;
    expect((await migrator.migrateTo(BEFORE_DPOP)).error).toBeUndefined();
    await sql`INSERT INTO clients (client_id, name, kind, type, allowed_scopes, grant_types) VALUES ('tv_d', 'TV', 'tv', 'public', '{profile}', '{refresh_token}')`.execute(
      db,
    );

    expect((await migrator.migrateTo('2026-11-24T09-30-00_dpop_binds_tokens_to_a_key')).error).toBeUndefined();
    expect(await dpopColumns(db)).toEqual([
      'access_tokens.dpop_jkt',
      'authorization_codes.dpop_jkt',
      'clients.require_dpop',
      'device_requests.dpop_jkt',
      'grants.dpop_jkt',
    ]);
    const app = await sql<{ require_dpop: boolean }>`SELECT require_dpop FROM clients WHERE client_id = 'tv_d'`.execute(db);
    expect(app.rows).toEqual([{ require_dpop: false }]);
    const record = () =>
      sql<{ n: number }>`
      INSERT INTO dpop_proofs (proof_hash, expires_at) VALUES (${hash('proof')}, now()) ON CONFLICT (proof_hash) DO NOTHING RETURNING 1 AS n`.execute(db);
    expect((await record()).rows).toHaveLength(1);
    expect((await record()).rows).toHaveLength(0);

    expect((await migrator.migrateTo(BEFORE_DPOP)).error).toBeUndefined();
    expect(await dpopColumns(db)).toEqual([]);
    expect(await tablesNamed(db, 'dpop_proofs')).toBe(0);
  });
});

describe('migration 2026-11-26T09-00-00_apps_register_where_sign_out_returns', () => {
  const state = unmigratedDatabase();
  const BEFORE = '2026-11-26T01-00-00_devices_that_show_no_phrase';

  it('gives every existing app no post-logout redirect URI, keeps its redirect URIs, and goes back down', async () => {
    const { db, migrator } = state;
    expect((await migrator.migrateTo(BEFORE)).error).toBeUndefined();
    await sql`INSERT INTO clients (client_id, name, kind, type, allowed_scopes, grant_types, redirect_uris)
              VALUES ('web_l', 'Web', 'web', 'public', '{openid}', '{authorization_code}', '{https://web.example/cb}')`.execute(db);

    expect((await migrator.migrateTo('2026-11-26T09-00-00_apps_register_where_sign_out_returns')).error).toBeUndefined();
    const app = await sql<{ redirect_uris: string[]; post_logout_redirect_uris: string[] }>`
      SELECT redirect_uris, post_logout_redirect_uris FROM clients WHERE client_id = 'web_l'`.execute(db);
    expect(app.rows).toEqual([{ redirect_uris: ['https://web.example/cb'], post_logout_redirect_uris: [] }]);

    expect((await migrator.migrateTo(BEFORE)).error).toBeUndefined();
    const columns = await sql<{ n: number }>`
      SELECT count(*)::int AS n FROM information_schema.columns WHERE table_name = 'clients' AND column_name = 'post_logout_redirect_uris'`.execute(db);
    expect(columns.rows[0]!.n).toBe(0);
  });
});

async function tablesNamed(db: Kysely<any>, name: string): Promise<number> {
  const rows = await sql<{ n: number }>`SELECT count(*)::int AS n FROM information_schema.tables WHERE table_name = ${name}`.execute(db);
  return rows.rows[0]!.n;
}

describe('migration 2026-11-24T09-00-00_signing_keys_rotate_and_are_sealed', () => {
  const BEFORE = '2026-11-24T08-00-00_web_apps_sign_in_with_a_code';
  const state = unmigratedDatabase();

  it('an existing database upgrades: its clear key keeps signing, and the first start seals it and the server secrets', async () => {
    const { db, migrator } = state;
    expect((await migrator.migrateTo(BEFORE)).error).toBeUndefined();
    const { publicKey, privateKey } = await generateKeyPair('RS256', { extractable: true });
    const publicJwk = await exportJWK(publicKey);
    const privateJwk = await exportJWK(privateKey);
    const kid = await calculateJwkThumbprint(publicJwk, 'sha256');
    await sql`INSERT INTO signing_keys (kid, alg, public_jwk, private_jwk, created_at)
              VALUES (${kid}, 'RS256', ${JSON.stringify(publicJwk)}, ${JSON.stringify(privateJwk)}, now() - interval '10 days')`.execute(db);
    await sql`INSERT INTO server_secrets (name, value) VALUES ('user_code_hmac_key', ${Buffer.alloc(32, 3)})`.execute(db);

    expect((await migrator.migrateToLatest()).error).toBeUndefined();
    const t = await startTestApp({ database: state.database });
    try {
      expect(t.deps.keys.signingKey().kid).toBe(kid);
      expect(t.deps.secrets.userCodeKey.equals(Buffer.alloc(32, 3))).toBe(true);
      const keys = await sql<{ kid: string; clear: boolean; sealed: boolean }>`
        SELECT kid, private_jwk IS NOT NULL AS clear, private_key_sealed IS NOT NULL AS sealed FROM signing_keys`.execute(db);
      // The old key and the next one the start made: both sealed, neither in the clear.
      expect(keys.rows).toHaveLength(2);
      for (const row of keys.rows) expect(row).toMatchObject({ clear: false, sealed: true });
      const secrets = await sql<{ row: string }>`SELECT s::text AS row FROM server_secrets s`.execute(db);
      expect(secrets.rows.map((r) => r.row).join()).not.toContain(Buffer.alloc(32, 3).toString('hex'));
      const dump = (await sql<{ row: string }>`SELECT s::text AS row FROM signing_keys s`.execute(db)).rows.map((r) => r.row).join();
      expect(dump).not.toContain(privateJwk.d!);
    } finally {
      await t.close();
    }
  });
});

describe('migration 2026-11-26T01-00-00_devices_that_show_no_phrase', () => {
  const state = unmigratedDatabase();
  const BEFORE = '2026-11-24T09-30-00_dpop_binds_tokens_to_a_key';
  const request = (db: Kysely<any>, label: string, phrase: string | null, choices: string[] | null) =>
    sql`
    INSERT INTO device_requests (device_code_hash, user_code_hmac, client_id, scopes, phrase, phrase_choices, interval_seconds, created_at, expires_at)
    VALUES (${hash(`dc-${label}`)}, ${hash(`uc-${label}`)}, 'tv_p', '{profile}', ${phrase}, ${choices}::text[], 5, now(), now() + interval '10 minutes')`.execute(
      db,
    );

  it('keeps the phrase of every existing app and request, lets a request have neither phrase nor choices but never one without the other, and goes back down', async () => {
    const { db, migrator } = state;
    expect((await migrator.migrateTo(BEFORE)).error).toBeUndefined();
    await sql`INSERT INTO clients (client_id, name, kind, type, allowed_scopes) VALUES ('tv_p', 'TV', 'tv', 'public', '{profile}')`.execute(db);
    await request(db, 'old', 'AmberFalcon', ['AmberFalcon', 'CopperHeron', 'DustyOtter']);
    await expect(request(db, 'none-before', null, null)).rejects.toThrow();

    expect((await migrator.migrateTo('2026-11-26T01-00-00_devices_that_show_no_phrase')).error).toBeUndefined();
    expect((await sql<{ confirmation_phrase: boolean }>`SELECT confirmation_phrase FROM clients`.execute(db)).rows).toEqual([{ confirmation_phrase: true }]);
    expect((await sql<{ phrase: string }>`SELECT phrase FROM device_requests`.execute(db)).rows).toEqual([{ phrase: 'AmberFalcon' }]);
    await request(db, 'none', null, null);
    await expect(request(db, 'half', 'AmberFalcon', null)).rejects.toThrow();
    await expect(request(db, 'other-half', null, ['AmberFalcon'])).rejects.toThrow();

    expect((await migrator.migrateTo(BEFORE)).error).toBeUndefined();
    // Down: the requests that have no phrase cannot exist before, so they go; the others stay.
    expect((await sql<{ phrase: string }>`SELECT phrase FROM device_requests`.execute(db)).rows).toEqual([{ phrase: 'AmberFalcon' }]);
    expect(
      (await sql<{ n: number }>`SELECT count(*)::int AS n FROM information_schema.columns WHERE column_name = 'confirmation_phrase'`.execute(db)).rows,
    ).toEqual([{ n: 0 }]);
  });
});

describe('migration 2026-11-26T12-00-00_grants_remember_their_origin', () => {
  const state = unmigratedDatabase();
  const BEFORE = '2026-11-26T09-00-00_platform_icons_are_bounded';
  const grant = (db: Kysely<any>, id: string) =>
    sql`
    INSERT INTO grants (grant_id, user_id, client_id, scopes, auth_time, created_at, last_used_at, expires_at)
    VALUES (${id}, '00000000-0000-4000-8000-000000000001', 'tv_o', '{profile}', now(), '2026-11-20T10:00:00Z', now(), now() + interval '30 days')`.execute(db);
  const issued = (db: Kysely<any>, id: string, reason: string, details: unknown) =>
    sql`
    INSERT INTO grant_events (grant_id, user_id, client_id, event, reason, created_at, details)
    VALUES (${id}, '00000000-0000-4000-8000-000000000001', 'tv_o', 'issued', ${reason}, now(), ${details === null ? null : JSON.stringify(details)}::jsonb)`.execute(
      db,
    );
  const DEVICE = '00000000-0000-4000-8000-00000000000d';
  const CODE = '00000000-0000-4000-8000-00000000000c';
  const BARE = '00000000-0000-4000-8000-00000000000b';

  it('gives existing grants their type, their creation as approval time and what their issued event recorded of the decision; bounds every new text; and goes back down', async () => {
    const { db, migrator } = state;
    expect((await migrator.migrateTo(BEFORE)).error).toBeUndefined();
    await sql`INSERT INTO clients (client_id, name, kind, type, allowed_scopes) VALUES ('tv_o', 'TV', 'tv', 'public', '{profile}')`.execute(db);
    await sql`INSERT INTO users (user_id, email, password_hash) VALUES ('00000000-0000-4000-8000-000000000001', 'o@example.test', 'x')`.execute(db);
    for (const id of [DEVICE, CODE, BARE]) await grant(db, id);
    await issued(db, DEVICE, 'device_code', {
      requester: { address: '3.34.0.1', country: 'KR', asn: 16509, network: 'Amazon.com, Inc.', hosting: true },
      approver: { address: '79.192.0.1', country: 'DE', asn: 3320, network: 'x'.repeat(300), hosting: false },
      signals: ['country_mismatch', 'hosting_network', 'made_up'],
      action: 'confirm',
    });
    await issued(db, CODE, 'authorization_code', null);

    expect((await migrator.migrateTo('2026-11-26T12-00-00_grants_remember_their_origin')).error).toBeUndefined();
    const rows = (
      await sql<Record<string, unknown>>`
      SELECT grant_id, grant_type, approved_at = created_at AS approved_at_creation, requester_asn::int AS requester_asn, requester_country,
             requester_hosting, approver_country, length(approver_network) AS approver_network_length, approval_signals, decision
      FROM grants ORDER BY grant_id`.execute(db)
    ).rows;
    expect(rows).toEqual([
      {
        grant_id: BARE,
        grant_type: 'device_code',
        approved_at_creation: true,
        requester_asn: null,
        requester_country: null,
        requester_hosting: null,
        approver_country: null,
        approver_network_length: null,
        approval_signals: null,
        decision: null,
      },
      {
        grant_id: CODE,
        grant_type: 'authorization_code',
        approved_at_creation: true,
        requester_asn: null,
        requester_country: null,
        requester_hosting: null,
        approver_country: null,
        approver_network_length: null,
        approval_signals: null,
        decision: null,
      },
      {
        grant_id: DEVICE,
        grant_type: 'device_code',
        approved_at_creation: true,
        requester_asn: 16509,
        requester_country: 'KR',
        requester_hosting: true,
        approver_country: 'DE',
        approver_network_length: 200,
        approval_signals: ['country_mismatch', 'hosting_network'],
        decision: 'confirm',
      },
    ]);
    for (const change of [
      sql`requester_country = 'kr'`,
      sql`requester_asn = 4294967296`,
      sql`requester_network = ${'n'.repeat(201)}`,
      sql`approval_signals = '{phished}'`,
      sql`decision = 'maybe'`,
      sql`grant_type = 'implicit'`,
      sql`redeemer_ip = ${'9'.repeat(65)}`,
    ]) {
      await expect(sql`UPDATE grants SET ${change} WHERE grant_id = ${DEVICE}`.execute(db)).rejects.toThrow();
    }
    const code = (address: string) =>
      sql`
      INSERT INTO authorization_codes (code_hash, client_id, user_id, redirect_uri, scopes, code_challenge, auth_time, created_at, expires_at, signed_in_ip)
      VALUES (${hash(`code-${address.length}`)}, 'tv_o', '00000000-0000-4000-8000-000000000001', 'https://a.example/cb', '{}', 'c', now(), now(), now(), ${address})`.execute(
        db,
      );
    await code('203.0.113.7');
    await expect(code('9'.repeat(65))).rejects.toThrow();
    await expect(
      sql`INSERT INTO grants (user_id, client_id, scopes, auth_time, created_at, last_used_at, expires_at) VALUES ('00000000-0000-4000-8000-000000000001', 'tv_o', '{}', now(), now(), now(), now())`.execute(
        db,
      ),
    ).rejects.toThrow();

    expect((await migrator.migrateTo(BEFORE)).error).toBeUndefined();
    expect(
      (
        await sql<{
          n: number;
        }>`SELECT count(*)::int AS n FROM information_schema.columns WHERE column_name IN ('grant_type', 'approved_at', 'requester_asn', 'decision')`.execute(
          db,
        )
      ).rows,
    ).toEqual([{ n: 0 }]);
    expect((await sql<{ n: number }>`SELECT count(*)::int AS n FROM grants`.execute(db)).rows).toEqual([{ n: 3 }]);
  });
});

describe('migrations 2026-11-26T14-20-00_deliveries_leave_in_order_and_retry and 14-21-00_webhooks_are_registered_with_a_sealed_secret', () => {
  const BEFORE = '2026-11-26T14-00-00_one_event_log_for_every_change';
  const state = unmigratedDatabase();

  it('make the delivery tables and the webhooks, which take rows; and go back down, with what they held', async () => {
    const { db, migrator } = state;
    expect((await migrator.migrateTo('2026-11-26T14-21-00_webhooks_are_registered_with_a_sealed_secret')).error).toBeUndefined();
    await sql`INSERT INTO webhooks (webhook_id, url, event_types, sealed_secret, created_at) VALUES ('wh_0000000000000001', 'https://hooks.example.com/', NULL, '\\x01', now())`.execute(
      db,
    );
    await sql`INSERT INTO outbound_deliveries (target_kind, target_id, event_id, message_id, next_attempt_at, created_at)
              VALUES ('webhook', 'wh_0000000000000001', 1, 'msg_1', now(), now()), ('ssf_push', 'stream-1', NULL, 'jti-1', NULL, now())`.execute(db);
    await sql`INSERT INTO delivery_attempts (delivery_id, attempted_at, http_status, duration_ms) SELECT delivery_id, now(), 500, 12 FROM outbound_deliveries`.execute(
      db,
    );
    await sql`INSERT INTO delivery_targets (target_kind, target_id, paused_at, pause_reason) VALUES ('ssf_push', 'stream-1', now(), 'operator')`.execute(db);
    // A pause without its reason (or the reverse) is refused.
    await expect(sql`INSERT INTO delivery_targets (target_kind, target_id, paused_at) VALUES ('webhook', 'x', now())`.execute(db)).rejects.toThrow();

    // Down one: the webhooks and what was queued for them go; another kind's deliveries stay.
    expect((await migrator.migrateTo('2026-11-26T14-20-00_deliveries_leave_in_order_and_retry')).error).toBeUndefined();
    expect(await tablesNamed(db, 'webhooks')).toBe(0);
    const left = await sql<{ target_kind: string }>`SELECT target_kind FROM outbound_deliveries`.execute(db);
    expect(left.rows).toEqual([{ target_kind: 'ssf_push' }]);
    expect((await migrator.migrateTo(BEFORE)).error).toBeUndefined();
    for (const table of ['outbound_deliveries', 'delivery_attempts', 'delivery_targets']) expect(await tablesNamed(db, table)).toBe(0);
    expect((await migrator.migrateToLatest()).error).toBeUndefined();
  });
});

describe('migration 2026-11-26T14-30-00_apps_act_for_themselves_with_client_credentials', () => {
  const state = unmigratedDatabase();
  const BEFORE = '2026-11-26T14-00-00_one_event_log_for_every_change';

  it('keeps every app as it was, lets a confidential one (never a public one) hold the grant and tokens of its own, and goes back down', async () => {
    const { db, migrator } = state;
    expect((await migrator.migrateTo(BEFORE)).error).toBeUndefined();
    await sql`INSERT INTO clients (client_id, name, kind, type, secret_hash, allowed_scopes, grant_types)
              VALUES ('bot_c', 'Bot', 'bot', 'confidential', ${hash('secret')}, '{openid}', '{urn:ietf:params:oauth:grant-type:device_code,refresh_token}'),
                     ('tv_c', 'TV', 'tv', 'public', NULL, '{openid}', '{urn:ietf:params:oauth:grant-type:device_code}')`.execute(db);

    expect((await migrator.migrateTo('2026-11-26T14-30-00_apps_act_for_themselves_with_client_credentials')).error).toBeUndefined();
    const apps = await sql<{ client_id: string; grant_types: string[] }>`SELECT client_id, grant_types FROM clients ORDER BY client_id`.execute(db);
    expect(apps.rows).toEqual([
      { client_id: 'bot_c', grant_types: ['urn:ietf:params:oauth:grant-type:device_code', 'refresh_token'] },
      { client_id: 'tv_c', grant_types: ['urn:ietf:params:oauth:grant-type:device_code'] },
    ]);
    await sql`UPDATE clients SET grant_types = '{client_credentials}', allowed_scopes = '{ssf.manage}' WHERE client_id = 'bot_c'`.execute(db);
    await expect(sql`UPDATE clients SET grant_types = '{client_credentials}' WHERE client_id = 'tv_c'`.execute(db)).rejects.toThrow(
      /clients_client_credentials_are_confidential/,
    );
    await expect(sql`UPDATE clients SET grant_types = '{password}' WHERE client_id = 'bot_c'`.execute(db)).rejects.toThrow(/clients_grant_types_known/);
    await sql`INSERT INTO app_access_tokens (token_hash, client_id, scopes, created_at, expires_at)
              VALUES (${hash('app token')}, 'bot_c', '{ssf.manage}', now(), now() + interval '1 hour')`.execute(db);
    await expect(
      sql`INSERT INTO app_access_tokens (token_hash, client_id, scopes, created_at, expires_at)
          VALUES (${hash('no scope')}, 'bot_c', '{}', now(), now() + interval '1 hour')`.execute(db),
    ).rejects.toThrow();
    // An app's tokens go with it.
    await sql`DELETE FROM clients WHERE client_id = 'bot_c'`.execute(db);
    expect((await sql<{ n: number }>`SELECT count(*)::int AS n FROM app_access_tokens`.execute(db)).rows).toEqual([{ n: 0 }]);
    await sql`INSERT INTO clients (client_id, name, kind, type, secret_hash, allowed_scopes, grant_types)
              VALUES ('web_c', 'Receiver', 'web', 'confidential', ${hash('secret')}, '{ssf.manage}', '{client_credentials,refresh_token}')`.execute(db);

    expect((await migrator.migrateTo(BEFORE)).error).toBeUndefined();
    expect(await tablesNamed(db, 'app_access_tokens')).toBe(0);
    const after = await sql<{ grant_types: string[] }>`SELECT grant_types FROM clients WHERE client_id = 'web_c'`.execute(db);
    expect(after.rows).toEqual([{ grant_types: ['refresh_token'] }]);
  });
});

describe('migration 2026-11-26T14-31-00_shared_signals_streams', () => {
  const state = unmigratedDatabase();
  const BEFORE = '2026-11-26T14-30-00_apps_act_for_themselves_with_client_credentials';

  it('gives every app the narrow audience, keeps streams to their rules, takes them and their SETs with the app, and goes back down', async () => {
    const { db, migrator } = state;
    expect((await migrator.migrateTo(BEFORE)).error).toBeUndefined();
    await sql`INSERT INTO clients (client_id, name, kind, type, secret_hash, allowed_scopes, grant_types)
              VALUES ('web_s', 'Receiver', 'web', 'confidential', ${hash('secret')}, '{ssf.manage}', '{client_credentials}')`.execute(db);

    expect((await migrator.migrateTo('2026-11-26T14-31-00_shared_signals_streams')).error).toBeUndefined();
    expect((await sql<{ ssf_all_users: boolean }>`SELECT ssf_all_users FROM clients`.execute(db)).rows).toEqual([{ ssf_all_users: false }]);
    const stream = (id: string, method: string, url: string | null) =>
      sql`INSERT INTO ssf_streams (stream_id, client_id, delivery_method, endpoint_url, created_at, updated_at)
          VALUES (${id}, 'web_s', ${method}, ${url}, now(), now())`.execute(db);
    await stream('pushpushpushpush', 'urn:ietf:rfc:8935', 'https://receiver.example/e');
    await stream('pollpollpollpoll', 'urn:ietf:rfc:8936', null);
    // Push names its endpoint, poll does not; ids are URL-safe; a method is one of the two.
    await expect(stream('nourlnourlnourl1', 'urn:ietf:rfc:8935', null)).rejects.toThrow();
    await expect(stream('urlurlurlurlurl1', 'urn:ietf:rfc:8936', 'https://receiver.example/e')).rejects.toThrow();
    await expect(stream('bad id with spaces', 'urn:ietf:rfc:8936', null)).rejects.toThrow();
    await expect(stream('otherotherother1', 'urn:example:smoke-signals', null)).rejects.toThrow();
    await sql`INSERT INTO ssf_sets (jti, stream_id, event_id, claims, created_at) VALUES ('jtijtijtijtijtij', 'pollpollpollpoll', NULL, '{}', now())`.execute(
      db,
    );
    await sql`INSERT INTO ssf_excluded_subjects (stream_id, user_id) VALUES ('pollpollpollpoll', '00000000-0000-4000-8000-000000000001')`.execute(db);
    await sql`DELETE FROM clients WHERE client_id = 'web_s'`.execute(db);
    for (const table of ['ssf_streams', 'ssf_sets', 'ssf_excluded_subjects']) {
      expect((await sql<{ n: number }>`SELECT count(*)::int AS n FROM ${sql.table(table)}`.execute(db)).rows, table).toEqual([{ n: 0 }]);
    }

    expect((await migrator.migrateTo(BEFORE)).error).toBeUndefined();
    for (const table of ['ssf_streams', 'ssf_sets', 'ssf_excluded_subjects']) expect(await tablesNamed(db, table)).toBe(0);
    const columns = await sql<{ n: number }>`
      SELECT count(*)::int AS n FROM information_schema.columns WHERE table_name = 'clients' AND column_name = 'ssf_all_users'`.execute(db);
    expect(columns.rows).toEqual([{ n: 0 }]);
  });
});

describe('migrations 2026-11-26T18-40-00_row_rules_run_when_their_columns_are_written and 18-50-00_events_index_only_what_they_name', () => {
  const state = unmigratedDatabase();
  const BEFORE = '2026-11-26T14-31-00_shared_signals_streams';
  const rules = async (db: Kysely<any>) => ({
    checks: (
      await sql<{ n: number }>`
        SELECT count(*)::int AS n FROM pg_constraint
        WHERE contype = 'c' AND conrelid IN ('grants'::regclass, 'device_requests'::regclass)`.execute(db)
    ).rows[0]!.n,
    triggers: (
      await sql<{ tgname: string }>`
        SELECT tgname FROM pg_trigger WHERE tgname LIKE '%follow_their_rules%' ORDER BY tgname`.execute(db)
    ).rows.map((row) => row.tgname),
    partialIndexes: (
      await sql<{ indexname: string }>`
        SELECT indexname FROM pg_indexes WHERE tablename = 'events' AND indexdef LIKE '%WHERE%' ORDER BY indexname`.execute(db)
    ).rows.map((row) => row.indexname),
  });

  it('take the CHECKs of grants and device requests into triggers and the events indexes off NULLs, and go back down to them', async () => {
    const { db, migrator } = state;
    expect((await migrator.migrateTo(BEFORE)).error).toBeUndefined();
    const before = await rules(db);
    expect(before).toEqual({ checks: 11, triggers: [], partialIndexes: [] });
    expect((await migrator.migrateToLatest()).error).toBeUndefined();
    expect(await rules(db)).toEqual({
      checks: 0,
      triggers: [
        'device_requests_follow_their_rules',
        'device_requests_follow_their_rules_when_written',
        'grants_follow_their_rules',
        'grants_follow_their_rules_when_written',
      ],
      partialIndexes: ['events_grant', 'events_user'],
    });
    expect((await migrator.migrateTo(BEFORE)).error).toBeUndefined();
    expect(await rules(db)).toEqual(before);
    expect((await migrator.migrateToLatest()).error).toBeUndefined();
  });
});
