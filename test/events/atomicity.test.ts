import { sql } from 'kysely';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildAdminApp } from '../../src/admin-app.js';
import { FORM, form, seedClient, seedUser, startTestApp, type TestApp } from '../helpers/app.js';
import { signedInBrowser } from '../helpers/browser.js';
import { refresh, signIn, userinfo } from '../helpers/tokens.js';

/**
 * Issue 32 §1, §4: an event exists if and only if its change committed. A deferred constraint
 * trigger fails the commit of any transaction that inserted an event of a chosen type: the failure
 * comes after the event's insert (and after every other statement of the change), at the last
 * moment. Each change below, made over HTTP, must then leave neither its event nor any part of
 * itself; with the failure lifted, the same change commits with its event.
 */

let t: TestApp;
let admin: FastifyInstance;

beforeAll(async () => {
  t = await startTestApp();
  admin = await buildAdminApp(t.deps, { listener: 'socket', logger: false });
  await sql`
    CREATE TABLE injected_failures (type text PRIMARY KEY);
    CREATE FUNCTION fail_the_commit() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF EXISTS (SELECT 1 FROM injected_failures f WHERE f.type = NEW.type) THEN
        RAISE EXCEPTION 'injected failure after the insert of a % event', NEW.type;
      END IF;
      RETURN NULL;
    END
    $$;
    CREATE CONSTRAINT TRIGGER events_fail_at_commit AFTER INSERT ON events
      DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION fail_the_commit();
  `.execute(t.deps.db);
});
afterAll(async () => {
  await admin?.close();
  await t?.close();
});

async function failing<T>(type: string, change: () => Promise<T>): Promise<T> {
  await sql`INSERT INTO injected_failures (type) VALUES (${type})`.execute(t.deps.db);
  try {
    return await change();
  } finally {
    await sql`DELETE FROM injected_failures`.execute(t.deps.db);
  }
}

const countOf = async (type: string, column: 'user_id' | 'client_id' | 'grant_id', id: string) =>
  Number(
    (
      await t.deps.db
        .selectFrom('events')
        .select((eb) => eb.fn.countAll().as('n'))
        .where('type', '=', type)
        .where(column, '=', id)
        .executeTakeFirstOrThrow()
    ).n,
  );

const adminCall = (method: 'POST' | 'DELETE', url: string) => admin.inject({ method, url });

describe('no event of a change that rolled back, no change without its event', () => {
  it('a ban (several statements in one transaction): failed at commit, the user is not banned, no grant revoked, no event; then it commits with them', async () => {
    const tv = await seedClient(t);
    const user = await seedUser(t);
    const tokens = await signIn(t, tv, user.userId);
    const failed = await failing('user.banned', () => adminCall('POST', `/admin/users/${user.email}/ban`));
    expect(failed.statusCode).toBe(500);
    expect((await userinfo(t, tokens.access_token)).statusCode).toBe(200);
    expect((await admin.inject({ method: 'GET', url: `/admin/users/${user.email}` })).json().banned).toBe(false);
    expect(await countOf('user.banned', 'user_id', user.userId)).toBe(0);
    expect(await countOf('grant.revoked', 'user_id', user.userId)).toBe(0);

    expect((await adminCall('POST', `/admin/users/${user.email}/ban`)).statusCode).toBe(200);
    expect((await userinfo(t, tokens.access_token)).statusCode).toBe(401);
    expect(await countOf('user.banned', 'user_id', user.userId)).toBe(1);
    expect(await countOf('grant.revoked', 'user_id', user.userId)).toBe(1);
  });

  it("a device code request (one statement, the event in a CTE): failed at commit, no request and no event; the device's next request gets its code", async () => {
    const tv = await seedClient(t, { name: 'Atomic TV' });
    const request = () => t.app.inject({ method: 'POST', url: '/oauth/device/code', headers: FORM, payload: form({ client_id: tv.clientId }) });
    const failed = await failing('device_request.created', request);
    expect(failed.statusCode).toBeGreaterThanOrEqual(500);
    const requests = () => t.deps.db.selectFrom('device_requests').select('request_id').where('client_id', '=', tv.clientId).execute();
    expect(await requests()).toEqual([]);
    expect(await countOf('device_request.created', 'client_id', tv.clientId)).toBe(0);

    expect((await request()).statusCode).toBe(200);
    expect(await requests()).toHaveLength(1);
    expect(await countOf('device_request.created', 'client_id', tv.clientId)).toBe(1);
  });

  it("a refresh token's rotation (the hot path's one statement): failed at commit, the old token still rotates, once, with its event", async () => {
    const tv = await seedClient(t, { name: 'Rotating TV' });
    const user = await seedUser(t);
    const tokens = await signIn(t, tv, user.userId);
    const failed = await failing('grant.rotated', () => refresh(t, tv, tokens.refresh_token!));
    expect(failed.statusCode).toBeGreaterThanOrEqual(500);
    expect(await countOf('grant.rotated', 'user_id', user.userId)).toBe(0);

    const rotated = await refresh(t, tv, tokens.refresh_token!);
    expect(rotated.statusCode, rotated.body).toBe(200);
    expect(await countOf('grant.rotated', 'user_id', user.userId)).toBe(1);
  });

  it("an app's deletion: failed at commit, the app and its grants live on, no event; then both go, each grant with its revocation", async () => {
    const tv = await seedClient(t, { name: 'Doomed TV' });
    const user = await seedUser(t);
    const tokens = await signIn(t, tv, user.userId);
    const failed = await failing('app.deleted', () => adminCall('DELETE', `/admin/clients/${tv.clientId}`));
    expect(failed.statusCode).toBe(500);
    expect((await admin.inject({ method: 'GET', url: `/admin/clients/${tv.clientId}` })).statusCode).toBe(200);
    expect((await userinfo(t, tokens.access_token)).statusCode).toBe(200);
    expect(await countOf('grant.revoked', 'client_id', tv.clientId)).toBe(0);

    expect((await adminCall('DELETE', `/admin/clients/${tv.clientId}`)).statusCode).toBe(200);
    expect(await countOf('grant.revoked', 'client_id', tv.clientId)).toBe(1);
    expect(await countOf('app.deleted', 'client_id', tv.clientId)).toBe(1);
  });

  it('a sign-out on the pages: failed at commit, the session lives on; then it ends with its event', async () => {
    const user = await seedUser(t);
    const browser = await signedInBrowser(t, user);
    await browser.get('/activate');
    const failed = await failing('session.signed_out', () => browser.post('/signout', {}));
    expect(failed.statusCode).toBeGreaterThanOrEqual(500);
    expect((await browser.get('/activate')).statusCode).toBe(200);
    expect(await countOf('session.signed_out', 'user_id', user.userId)).toBe(0);

    expect((await browser.post('/signout', {})).statusCode).toBe(303);
    expect((await browser.get('/activate')).statusCode).toBe(303);
    expect(await countOf('session.signed_out', 'user_id', user.userId)).toBe(1);
  });
});
