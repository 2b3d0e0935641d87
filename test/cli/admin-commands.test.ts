import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createCliTarget, runProgram, type CliTarget } from '../helpers/cli.js';

/**
 * Issue 19 §3: the commands added with the admin API, run as the real program with no server
 * running (the CLI's in-process admin API on the database). With a server running the same routes
 * answer through its socket or ADMIN_URL (test/cli/five-minute-flow.test.ts).
 */

vi.setConfig({ testTimeout: 180_000, hookTimeout: 120_000 });

let target: CliTarget;
const cli = (args: string[], stdin = '') => runProgram(args, target.env, 120_000, stdin);
const json = (stdout: string) => JSON.parse(stdout) as Record<string, any>;

beforeAll(async () => {
  target = await createCliTarget();
});
afterAll(() => target.cleanup());

describe('client and user commands through the admin API', () => {
  it('client create and update register grant types (device_code for short), exact redirect URIs and post-logout redirect URIs; a bad URI is one line, exit 2', async () => {
    const created = await cli([
      'client',
      'create',
      '--name',
      'Shop',
      '--kind',
      'web',
      '--type',
      'confidential',
      '--grant-types',
      'authorization_code refresh_token',
      '--redirect-uri',
      'https://shop.example/cb',
      '--redirect-uri',
      'http://127.0.0.1:8765/cb',
      '--post-logout-redirect-uri',
      'https://shop.example/bye',
      '--post-logout-redirect-uri',
      'http://127.0.0.1:8765/bye',
    ]);
    expect(created.code, created.stderr).toBe(0);
    const shop = json(created.stdout);
    expect(shop).toMatchObject({
      grant_types: ['authorization_code', 'refresh_token'],
      redirect_uris: ['https://shop.example/cb', 'http://127.0.0.1:8765/cb'],
      post_logout_redirect_uris: ['https://shop.example/bye', 'http://127.0.0.1:8765/bye'],
    });
    // Without the code grant its URIs would be unusable: refused, saying what to add.
    const orphaned = await cli(['client', 'update', shop.client_id, '--grant-types', 'device_code']);
    expect(orphaned.code).toBe(2);
    expect(orphaned.stderr).toContain('add authorization_code to grant_types (CLI: --grant-types');
    const cleared = await cli(['client', 'update', shop.client_id, '--grant-types', 'device_code', '--no-redirect-uris', '--no-post-logout-redirect-uris']);
    expect(cleared.code, cleared.stderr).toBe(0);
    expect(json(cleared.stdout)).toMatchObject({
      grant_types: ['urn:ietf:params:oauth:grant-type:device_code'],
      redirect_uris: [],
      post_logout_redirect_uris: [],
    });
    // A web app given a redirect URI without the grant that uses it: refused, not registered silently.
    const silent = await cli(['client', 'create', '--name', 'Silent', '--kind', 'web', '--type', 'public', '--redirect-uri', 'https://silent.example/cb']);
    expect(silent.code).toBe(2);
    expect(silent.stderr.trim().split('\n')).toHaveLength(1);
    expect(silent.stderr).toContain('add authorization_code to grant_types (CLI: --grant-types');
    const bad = await cli(['client', 'update', shop.client_id, '--redirect-uri', 'http://shop.example/cb']);
    expect(bad.code).toBe(2);
    expect(bad.stderr.trim().split('\n')).toHaveLength(1);
    expect(bad.stderr).toContain('redirect_uris');
    const both = await cli(['client', 'update', shop.client_id, '--redirect-uri', 'https://shop.example/cb', '--no-redirect-uris']);
    expect(both.code).toBe(2);
    // A web app that signs users in on the web: authorization_code, which needs a redirect URI.
    const web = await cli([
      'client',
      'update',
      shop.client_id,
      '--grant-types',
      'authorization_code refresh_token',
      '--redirect-uri',
      'https://shop.example/cb',
    ]);
    expect(web.code, web.stderr).toBe(0);
    expect(json(web.stdout)).toMatchObject({ grant_types: ['authorization_code', 'refresh_token'], redirect_uris: ['https://shop.example/cb'] });
    const noWayBack = await cli(['client', 'create', '--name', 'Lost', '--kind', 'web', '--type', 'public', '--grant-types', 'authorization_code']);
    expect(noWayBack.code).toBe(2);
    expect(noWayBack.stderr).toContain('needs at least one redirect URI');
  });

  it('client create --dpop registers dpop_bound_access_tokens (RFC 9449 §5.2); update --no-dpop takes it away', async () => {
    const created = await cli(['client', 'create', '--name', 'Bound TV', '--kind', 'tv', '--type', 'public', '--dpop']);
    expect(created.code, created.stderr).toBe(0);
    const tv = json(created.stdout);
    expect(tv.dpop_bound_access_tokens).toBe(true);
    const shown = json((await cli(['client', 'show', tv.client_id])).stdout);
    expect(shown.dpop_bound_access_tokens).toBe(true);
    const relaxed = await cli(['client', 'update', tv.client_id, '--no-dpop']);
    expect(relaxed.code, relaxed.stderr).toBe(0);
    expect(json(relaxed.stdout).dpop_bound_access_tokens).toBe(false);
    expect((await cli(['client', 'update', tv.client_id, '--dpop', '--no-dpop'])).code).toBe(2);
  });

  it('client update, rotate-secret (with --grace), delete; each names an unknown client', async () => {
    const created = json((await cli(['client', 'create', '--name', 'Hall Bot', '--kind', 'bot', '--type', 'confidential'])).stdout);
    const updated = await cli(['client', 'update', created.client_id, '--name', 'Hallway Bot', '--scope', 'openid profile']);
    expect(updated.code, updated.stderr).toBe(0);
    expect(json(updated.stdout)).toMatchObject({ client_id: created.client_id, name: 'Hallway Bot', scopes: ['openid', 'profile'] });
    expect((await cli(['client', 'update', created.client_id])).stderr).toContain('nothing to change');

    const rotated = await cli(['client', 'rotate-secret', created.client_id, '--grace', '300']);
    expect(rotated.code, rotated.stderr).toBe(0);
    expect(json(rotated.stdout)).toMatchObject({
      client_id: created.client_id,
      client_secret: expect.stringMatching(/^dacs_/),
      previous_secret_expires_at: expect.any(String),
    });
    expect(json(rotated.stdout).client_secret).not.toBe(created.client_secret);
    const badGrace = await cli(['client', 'rotate-secret', created.client_id, '--grace', 'soon']);
    expect(badGrace.code).toBe(2);
    expect(badGrace.stderr).toContain('--grace must be a whole number of seconds');

    const deleted = await cli(['client', 'delete', created.client_id]);
    expect(json(deleted.stdout)).toEqual({ deleted: true });
    for (const sub of ['show', 'delete', 'disable']) {
      const res = await cli(['client', sub, created.client_id]);
      expect(res.code).toBe(2);
      expect(res.stderr).toContain(`no client ${created.client_id}: see \`device-auth client list\``);
    }
  });

  it('a public client has no secret to rotate', async () => {
    const tv = json((await cli(['client', 'create', '--name', 'Hall TV', '--kind', 'tv', '--type', 'public'])).stdout);
    const res = await cli(['client', 'rotate-secret', tv.client_id]);
    expect(res.code).toBe(2);
    expect(res.stderr).toContain('is a public client: it has no secret to rotate');
  });

  it('user create twice says to use user show; devices and apps list nothing yet; sign-out and remove-access name what is missing; delete', async () => {
    expect((await cli(['user', 'create', '--email', 'hall@example.test', '--name', 'Hall'], 'a long enough password\n')).code).toBe(0);
    const again = await cli(['user', 'create', '--email', 'HALL@example.test'], 'a long enough password\n');
    expect(again.code).toBe(2);
    expect(again.stderr).toContain('a user with this email exists: use `device-auth user show hall@example.test`');
    for (const sub of ['devices', 'apps']) {
      const res = await cli(['user', sub, 'hall@example.test']);
      expect(res.code, res.stderr).toBe(0);
      expect(res.stdout).toBe('');
    }
    const signOut = await cli(['user', 'sign-out', 'hall@example.test', '00000000-0000-4000-8000-000000000000']);
    expect(signOut.code).toBe(2);
    expect(signOut.stderr).toContain('no signed-in device');
    expect((await cli(['user', 'remove-access', 'hall@example.test'])).stderr).toContain('expected EMAIL and CLIENT_ID');
    expect(json((await cli(['user', 'delete', 'hall@example.test'])).stdout)).toEqual({ deleted: true });
    const gone = await cli(['user', 'show', 'hall@example.test']);
    expect(gone.stderr).toContain('no user hall@example.test');
  });

  it("user update and set-password; a deleted user's history stays, by id, each change naming the in-process CLI, never the email", async () => {
    expect((await cli(['user', 'create', '--email', 'moved@example.test'], 'a long enough password\n')).code).toBe(0);
    const renamed = await cli(['user', 'update', 'moved@example.test', '--name', 'Moved']);
    expect(renamed.code, renamed.stderr).toBe(0);
    expect(json(renamed.stdout)).toMatchObject({ email: 'moved@example.test', name: 'Moved' });
    expect((await cli(['user', 'update', 'moved@example.test'])).stderr).toContain('nothing to change');
    const password = await cli(['user', 'set-password', 'moved@example.test'], 'another long enough password\n');
    expect(password.code, password.stderr).toBe(0);
    expect(json(password.stdout)).toMatchObject({ sessions_ended: 0 });
    expect((await cli(['user', 'set-password', 'moved@example.test'], 'short\n')).code).toBe(2);
    const userId = json((await cli(['user', 'show', 'moved@example.test'])).stdout).user_id;
    expect(json((await cli(['user', 'delete', 'moved@example.test'])).stdout)).toEqual({ deleted: true });
    // Issue 32 §1: the history stays, by id, each change naming the in-process CLI as its actor; never the email.
    const history = await cli(['events', '--user', userId]);
    expect(history.code, history.stderr).toBe(0);
    const events = history.stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line));
    expect(events.map((e) => e.type)).toEqual(['user.created', 'user.changed', 'user.password_changed', 'user.deleted']);
    for (const e of events) expect(e.actor).toEqual({ kind: 'admin', via: 'cli' });
    expect(events[1].data).toEqual({ fields: ['name'] });
    expect(history.stdout).not.toContain('moved@example.test');
    for (const secret of ['a long enough password', 'another long enough password', 'argon2']) expect(history.stdout).not.toContain(secret);
  });

  it('events by client and since; purge; housekeeping', async () => {
    const events = await cli(['events', '--since', '2026-01-01T00:00:00Z']);
    expect(events.code, events.stderr).toBe(0);
    // An app that never existed has no events (a deleted one's are still listed).
    const none = await cli(['events', '--client', 'tv_nothing']);
    expect(none.code, none.stderr).toBe(0);
    expect(none.stdout).toBe('');
    const unknownType = await cli(['events', '--type', 'grant.revoked,grant.exploded']);
    expect(unknownType.code).toBe(2);
    expect(unknownType.stderr).toContain('type');
    expect((await cli(['events', '--since', 'yesterday'])).code).toBe(2);
    const purged = await cli(['purge']);
    expect(Object.keys(json(purged.stdout)).sort()).toEqual([
      'accessTokens',
      'authorizationCodes',
      'browserSessions',
      'deliveries',
      'deviceRequests',
      'dpopProofs',
      'events',
      'grants',
      'platformIcons',
      'rateLimitCounters',
      'securityEventTokens',
    ]);
    // No server runs here: the in-process API's housekeeping is not scheduled.
    expect(json((await cli(['housekeeping'])).stdout)).toMatchObject({ scheduled: false, consecutive_failures: 0 });
  });
});
