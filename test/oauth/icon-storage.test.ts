import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signOutDevice } from '../../src/accounts/devices.js';
import { purgeExpired } from '../../src/housekeeping/purge.js';
import { seedClient, seedUser, startTestApp, type TestApp } from '../helpers/app.js';
import { decide, poll, startDeviceFlow } from '../helpers/device.js';
import { fetchingFrom, ICON_PNG, startIconServer, type IconServer } from '../helpers/icon-server.js';

/**
 * Issue 28 §2: every anonymous device request could name its own icon URL, and every distinct
 * image was stored (300 requests, 19.5 MB). Icon storage is bounded per app and in total, and an
 * icon is kept only while a pending or approved request, or a live grant, shows it.
 */

const ICON_BYTES = 30_000;
let server: IconServer;
let t: TestApp;
let user: { userId: string };

beforeAll(async () => {
  server = await startIconServer();
  // Every path is its own image: a PNG with bytes of its own after it, 30,000 bytes in all.
  const fetching = fetchingFrom(server);
  t = await startTestApp({ ...fetching, env: { ...fetching.env, ICON_STORAGE_PER_APP: '65536', ICON_STORAGE_TOTAL: '131072' } });
  user = await seedUser(t);
});
afterAll(async () => {
  await t.close();
  await server.close();
});

let served = 0;
/** A URL of a new, distinct image on the icon server. */
function newIconUrl(): string {
  const path = `/icon-${++served}.png`;
  const bytes = Buffer.concat([ICON_PNG, randomBytes(ICON_BYTES - ICON_PNG.length)]);
  server.route(path, (_request, response) => response.writeHead(200, { 'content-type': 'image/png', 'content-length': bytes.length }).end(bytes));
  return server.url(path);
}

/** A device request of `clientId` naming a new icon; whether the server stored an icon for it. */
async function requestWithNewIcon(clientId: string) {
  const started = await startDeviceFlow(t, clientId, { platform_icon: newIconUrl() });
  await t.deps.platformIcons.settled();
  const row = await t.deps.db
    .selectFrom('device_requests')
    .select(['request_id', 'platform_icon_sha256'])
    .orderBy('request_id', 'desc')
    .executeTakeFirstOrThrow();
  return { started, iconStored: row.platform_icon_sha256 !== null };
}

const storedBytes = async (clientId?: string) => {
  let query = t.deps.db.selectFrom('platform_icons').select((eb) => eb.fn.coalesce(eb.fn.sum<number>('byte_count'), eb.lit(0)).as('n'));
  if (clientId) query = query.where('client_id', '=', clientId);
  return Number((await query.executeTakeFirstOrThrow()).n);
};

describe('icon storage is bounded per app and in total (ICON_STORAGE_PER_APP=65536, ICON_STORAGE_TOTAL=131072)', () => {
  it('10 requests of one app naming 10 distinct icons store 2 of them (64 KiB); its requests still get their codes', async () => {
    const flood = await seedClient(t, { name: 'Flooding TV' });
    const answers = [];
    for (let i = 0; i < 10; i++) answers.push(await requestWithNewIcon(flood.clientId));
    expect(answers.map((a) => a.iconStored)).toEqual([true, true, ...Array<boolean>(8).fill(false)]);
    expect(await storedBytes(flood.clientId)).toBe(2 * ICON_BYTES);
    const metric = await t.deps.metrics.platformIconFetches.get();
    expect(metric.values.find((v) => v.labels.outcome === 'dropped_storage_full')?.value).toBe(8);
  });

  it('another app still stores its icons, until all icons together reach the total', async () => {
    const other = await seedClient(t, { name: 'Other TV' });
    expect((await requestWithNewIcon(other.clientId)).iconStored).toBe(true);
    expect((await requestWithNewIcon(other.clientId)).iconStored).toBe(true);
    const third = await seedClient(t, { name: 'Third TV' });
    expect((await requestWithNewIcon(third.clientId)).iconStored).toBe(false);
    expect(await storedBytes()).toBeLessThanOrEqual(131_072);
  });
});

describe('an icon is kept only while a pending or approved request, or a live grant, shows it', () => {
  it('a denied request keeps no icon: purged an hour after its last use, while the request row is still there; a pending one keeps its icon', async () => {
    await t.deps.db.deleteFrom('platform_icons').execute();
    const tv = await seedClient(t, { name: 'Kitchen TV' });
    const denied = await requestWithNewIcon(tv.clientId);
    const pending = await requestWithNewIcon(tv.clientId);
    expect(denied.iconStored && pending.iconStored).toBe(true);
    await decide(t, denied.started.user_code, user.userId, 'deny');
    t.clock.advance(3601);
    // The pending request has expired by now too (10 minutes): expired requests keep no icon either.
    const purged = await purgeExpired(t.deps.db, t.clock.now(), t.config.purge);
    expect(purged.deviceRequests).toBe(0);
    expect(purged.platformIcons).toBe(2);
  });

  it('a pending request within its lifetime keeps its icon however old the icon', async () => {
    await t.deps.db.deleteFrom('platform_icons').execute();
    const tv = await seedClient(t, { name: 'Hall TV' });
    expect((await requestWithNewIcon(tv.clientId)).iconStored).toBe(true);
    // Its last use an hour ago, the request still live.
    await t.deps.db
      .updateTable('platform_icons')
      .set({ last_used_at: new Date(t.clock.now().getTime() - 7200_000) })
      .execute();
    expect((await purgeExpired(t.deps.db, t.clock.now(), t.config.purge)).platformIcons).toBe(0);
  });

  it('a signed-out grant keeps no icon: purged while the ended grant is still kept for its retention', async () => {
    await t.deps.db.deleteFrom('platform_icons').execute();
    const tv = await seedClient(t, { name: 'Bedroom TV' });
    const { started, iconStored } = await requestWithNewIcon(tv.clientId);
    expect(iconStored).toBe(true);
    await decide(t, started.user_code, user.userId, 'approve');
    t.clock.advance(started.interval);
    expect((await poll(t, tv.clientId, started.device_code)).statusCode).toBe(200);
    t.clock.advance(3601);
    expect((await purgeExpired(t.deps.db, t.clock.now(), t.config.purge)).platformIcons).toBe(0);
    const grant = await t.deps.db.selectFrom('grants').select('grant_id').where('client_id', '=', tv.clientId).executeTakeFirstOrThrow();
    expect(await signOutDevice(t.deps, user.userId, grant.grant_id, null)).toBe('signed_out');
    const purged = await purgeExpired(t.deps.db, t.clock.now(), t.config.purge);
    expect(purged).toMatchObject({ grants: 0, platformIcons: 1 });
  });
});
