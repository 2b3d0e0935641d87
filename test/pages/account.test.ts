import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadCatalogues } from '../../src/i18n/catalogues.js';
import { setUserBannedAt } from '../../src/repositories/users.js';
import { seedClient, seedUser, startTestApp, type TestApp } from '../helpers/app.js';
import { Browser, signedInBrowser } from '../helpers/browser.js';
import {
  eventsOf,
  expectAllRefused,
  introspection,
  grantOf,
  refresh,
  refreshed,
  revoke,
  signIn as signInDevice,
  userinfo,
  type TestClient,
} from '../helpers/tokens.js';

type App = TestClient & { name: string };
type User = Awaited<ReturnType<typeof seedUser>>;

let t: TestApp;
let tv: App;
let bot: App;
let web: App;
/** A resource server: introspects with HTTP Basic. */
let rs: TestClient;

async function seedApp(options: Parameters<typeof seedClient>[1] & { name: string }): Promise<App> {
  return { ...(await seedClient(t, options)), name: options.name };
}

beforeAll(async () => {
  t = await startTestApp();
  tv = await seedApp({ kind: 'tv', name: 'Living Room TV' });
  bot = await seedApp({ kind: 'bot', type: 'confidential', name: 'Helper Bot' });
  web = await seedApp({ kind: 'web', name: 'Photo Board', scopes: ['openid', 'profile'] });
  rs = await seedClient(t, { kind: 'web', type: 'confidential', name: 'Photo API' });
});
afterAll(() => t.close());

const DEVICES = '/account/devices';
const APPS = '/account/apps';

/** Signs a device of `app` in to the user's account through the whole device flow; its tokens and grant. */
async function connect(app: App, user: User, platform: { platform_name?: string; platform_description?: string } = {}) {
  const tokens = await signInDevice(t, app, user.userId, undefined, platform);
  return { ...tokens, grantId: (await grantOf(t, tokens.access_token)).grant_id };
}
type Device = Awaited<ReturnType<typeof connect>>;

/** Whether the device's access token is still accepted: UserInfo answers and introspection says active. */
async function works(device: Device): Promise<boolean> {
  const { active } = await introspection(t, rs, device.access_token);
  expect((await userinfo(t, device.access_token)).statusCode).toBe(active ? 200 : 401);
  return active;
}

/** The next introspection, userinfo and refresh of the device all fail. */
const expectRefused = (app: App, device: Device) =>
  expectAllRefused(t, rs, app, { access: [device.access_token], refresh: device.refresh_token ? [device.refresh_token] : [] });

/** Replays a replaced refresh token, as a thief would, past the retry window: the service revokes the whole grant. */
async function stealAndReplay(app: App, device: Device) {
  await refreshed(t, app, device.refresh_token!);
  t.clock.advance(t.config.refreshRetryWindow + 1);
  expect((await refresh(t, app, device.refresh_token!)).json().error).toBe('invalid_grant');
}

const revocationsCounted = async (reason: string) => (await t.deps.metrics.grantRevocations.get()).values.find((v) => v.labels.reason === reason)?.value ?? 0;

const grant = (grantId: string) => t.deps.db.selectFrom('grants').selectAll().where('grant_id', '=', grantId).executeTakeFirstOrThrow();
const revocations = async (grantId: string) => (await eventsOf(t, grantId)).filter((event) => event.type === 'grant.revoked');

/** The rows (cards) of a Devices or Connected apps page. */
const rows = (html: string) => [...html.matchAll(/<li class="card">([\s\S]*?)<\/li>/g)].map((match) => match[1] ?? '');
const hiddenValues = (html: string, name: string) => [...html.matchAll(new RegExp(`name="${name}" value="([^"]*)"`, 'g'))].map((m) => m[1]);
const rowOf = (html: string, name: string, value: string) => rows(html).find((row) => row.includes(`name="${name}" value="${value}"`));

/** A signed-in browser that has loaded `page`, so it holds the CSRF token the page's forms carry. */
async function browserOn(user: User, page: string): Promise<Browser> {
  const browser = await signedInBrowser(t, user);
  expect((await browser.get(page)).statusCode).toBe(200);
  return browser;
}

/** A page as the signed-in user sees it. */
async function pageFor(user: User, page: string) {
  const res = await (await signedInBrowser(t, user)).get(page);
  expect(res.statusCode).toBe(200);
  return res;
}

const signOut = (browser: Browser, grantId: string, options?: { csrfToken?: string | null }) =>
  browser.post(`${DEVICES}/sign-out`, { grant_id: grantId }, options);
const removeAccess = (browser: Browser, clientId: string, options?: { csrfToken?: string | null }) =>
  browser.post(`${APPS}/remove`, { client_id: clientId }, options);

const catalogues = loadCatalogues();
const shownTime = (date: Date) => catalogues.translator('en').ago(date, t.clock.now());

describe('times on the account pages', () => {
  it.each([
    ['en', '2026-11-21T21:04:59.500Z', '21 Nov 2026, 21:04 UTC'],
    ['en', '2027-01-05T03:07:00.000Z', '5 Jan 2027, 03:07 UTC'],
    // CLDR has abbreviated September as "Sept" in British English since version 38.
    ['en', '2026-09-30T00:00:00.000Z', /^30 Sept? 2026, 00:00 UTC$/],
    ['de', '2026-11-21T21:04:59.500Z', '21. Nov. 2026, 21:04 UTC'],
    ['de', '2027-01-05T03:07:00.000Z', '5. Jan. 2027, 03:07 UTC'],
  ] as const)('in %s, %s is shown as "%s", whatever the server\'s time zone', (language, iso, text) => {
    expect(catalogues.translator(language).time(new Date(iso))).toMatch(text);
  });

  // Issue 27 §5: pages tell how long ago, which needs no time zone (pages run no script).
  it.each([
    ['en', 0, 'less than a minute ago'],
    ['en', 59, 'less than a minute ago'],
    ['en', 60, '1 minute ago'],
    ['en', 3 * 60 + 59, '3 minutes ago'],
    ['en', 59 * 60, '59 minutes ago'],
    ['en', 2 * 3600 + 1, '2 hours ago'],
    ['en', 86_400, 'yesterday'],
    ['en', 3 * 86_400, '3 days ago'],
    ['en', 45 * 86_400, 'last month'],
    ['en', 400 * 86_400, 'last year'],
    ['de', 3 * 60, 'vor 3 Minuten'],
    ['de', 86_400, 'gestern'],
    ['de', 5 * 86_400, 'vor 5 Tagen'],
  ] as const)('in %s, %i seconds before now is told as "%s"', (language, seconds, text) => {
    const now = new Date('2026-11-26T12:00:00.000Z');
    expect(catalogues.translator(language).ago(new Date(now.getTime() - seconds * 1000), now)).toBe(text);
  });
});

describe('Devices page', () => {
  const hostile = {
    platform_name: '<script>alert(1)</script>',
    platform_description: 'Kitchen tablet "by the fridge" & <b>friends</b>',
  };

  it('lists one row per live grant of a TV or bot app: app name and kind, platform fields marked Unverified, sign-in and last-use times', async () => {
    const user = await seedUser(t);
    const hostileTv = await connect(tv, user, hostile);
    const plainTv = await connect(tv, user);
    const botDevice = await connect(bot, user, { platform_name: 'CI runner' });
    const webSession = await connect(web, user);
    const revokedByApp = await connect(tv, user, { platform_name: 'Old TV' });
    expect((await revoke(t, tv, revokedByApp.refresh_token!)).statusCode).toBe(200);
    await stealAndReplay(bot, await connect(bot, user, { platform_name: 'Stolen bot' }));
    await connect(tv, await seedUser(t), { platform_name: 'Someone else' });
    // Used after signing in, so the two times differ.
    t.clock.advance(600);
    await refreshed(t, tv, plainTv.refresh_token!);

    const page = await pageFor(user, DEVICES);
    expect(page.statusCode).toBe(200);
    expect(page.body).toContain('<h1>Devices</h1>');
    // Most recently used first.
    expect(hiddenValues(page.body, 'grant_id')).toEqual([plainTv.grantId, botDevice.grantId, hostileTv.grantId]);
    expect(page.body).not.toContain('Old TV');
    expect(page.body).not.toContain('Stolen bot');
    expect(page.body).not.toContain('Someone else');
    // A web app's grant is not a device.
    expect(page.body).not.toContain(web.name);
    expect(page.body).not.toContain(webSession.grantId);

    const hostileRow = rowOf(page.body, 'grant_id', hostileTv.grantId)!;
    expect(hostileRow).toContain('<h2 class="app-name">Living Room TV</h2>');
    expect(hostileRow).toContain('TV or device app');
    expect(hostileRow).toContain('<dd>&lt;script&gt;alert(1)&lt;/script&gt; <span class="unverified">Unverified</span></dd>');
    expect(hostileRow).toContain(
      '<dd>Kitchen tablet &quot;by the fridge&quot; &amp; &lt;b&gt;friends&lt;/b&gt; <span class="unverified">Unverified</span></dd>',
    );
    const botRow = rowOf(page.body, 'grant_id', botDevice.grantId)!;
    expect(botRow).toContain('<h2 class="app-name">Helper Bot</h2>');
    expect(botRow).toContain('<p class="muted kind">Bot</p>');
    expect(botRow).toContain('<dd>CI runner <span class="unverified">Unverified</span></dd>');
    expect(rowOf(page.body, 'grant_id', plainTv.grantId)).not.toContain('Unverified');

    for (const device of [hostileTv, plainTv, botDevice]) {
      const stored = await grant(device.grantId);
      const row = rowOf(page.body, 'grant_id', device.grantId)!;
      expect(row).toContain(
        `<dt>Signed in</dt>\n      <dd><time datetime="${stored.created_at.toISOString()}">${shownTime(stored.created_at)}</time>, from this server itself</dd>`,
      );
      expect(row).toContain(
        `<dt>Last used</dt>\n      <dd><time datetime="${stored.last_used_at.toISOString()}">${shownTime(stored.last_used_at)}</time>, from this server itself</dd>`,
      );
    }
  });

  it('escapes every platform field: no markup of the device reaches the page', async () => {
    const user = await seedUser(t);
    await connect(tv, user, hostile);
    const page = await pageFor(user, DEVICES);
    expect(page.body).not.toContain('<script>');
    expect(page.body).not.toContain('<b>');
  });

  it('each Sign out button is a CSRF-protected form whose accessible name names the device', async () => {
    const user = await seedUser(t);
    const named = await connect(tv, user, { platform_name: 'Bedroom' });
    const unnamed = await connect(bot, user);
    const browser = await browserOn(user, DEVICES);
    const page = await browser.get(DEVICES);
    for (const [device, label] of [
      [named, 'Living Room TV (Bedroom)'],
      [unnamed, 'Helper Bot'],
    ] as const) {
      const row = rowOf(page.body, 'grant_id', device.grantId)!;
      expect(row).toContain('<form method="post" action="/account/devices/sign-out">');
      expect(row).toContain(`<input type="hidden" name="csrf_token" value="${browser.csrfToken}">`);
      expect(row).toContain(`<button type="submit" class="danger">Sign out<span class="visually-hidden"> ${label}</span></button>`);
    }
  });

  it('a grant past its expiry is not listed', async () => {
    const user = await seedUser(t);
    const device = await connect(tv, user);
    await t.deps.db.updateTable('grants').set({ expires_at: t.clock.now() }).where('grant_id', '=', device.grantId).execute();
    const page = await pageFor(user, DEVICES);
    expect(page.body).toContain('No devices are signed in.');
  });
});

describe('empty states', () => {
  it.each([
    [DEVICES, 'No devices are signed in.'],
    [APPS, 'No apps have access to your account.'],
  ])('%s with nothing signed in: "%s"', async (path, text) => {
    const page = await pageFor(await seedUser(t), path);
    expect(page.body).toContain(`<p class="card">${text}</p>`);
    expect(rows(page.body)).toHaveLength(0);
  });
});

describe('Sign out from the Devices page', () => {
  it.each([
    ['a TV app', () => tv],
    ['a bot', () => bot],
  ])('%s, with a valid CSRF token: at once the next introspection, userinfo and refresh fail, and the row is gone', async (_kind, app) => {
    const user = await seedUser(t);
    const device = await connect(app(), user, { platform_name: 'Kitchen' });
    const other = await connect(app(), user);
    const browser = await browserOn(user, DEVICES);
    expect(await works(device)).toBe(true);

    const res = await signOut(browser, device.grantId);
    expect(res.statusCode).toBe(303);
    expect(res.headers.location).toBe(`${DEVICES}?signed_out=${device.grantId}`);
    await expectRefused(app(), device);

    const page = await browser.follow(res);
    expect(page.statusCode).toBe(200);
    expect(page.body).toContain(`<p class="notice" role="status">Signed out ${app().name}.</p>`);
    expect(hiddenValues(page.body, 'grant_id')).toEqual([other.grantId]);
    expect(await works(other)).toBe(true);
    await refreshed(t, app(), other.refresh_token!);
  });

  it('revokes the grant in the database with reason signed_out_by_user and records a grant event with the IP', async () => {
    const user = await seedUser(t);
    const device = await connect(bot, user);
    const browser = await browserOn(user, DEVICES);
    const counted = await revocationsCounted('signed_out_by_user');
    await signOut(browser, device.grantId);
    expect(await grant(device.grantId)).toMatchObject({ user_id: user.userId, revoked_at: t.clock.now(), revoked_reason: 'signed_out_by_user' });
    expect(await revocations(device.grantId)).toEqual([{ type: 'grant.revoked', reason: 'signed_out_by_user', client_ip: '127.0.0.1' }]);
    expect(await revocationsCounted('signed_out_by_user')).toBe(counted + 1);
  });

  it("another user's grant_id: nothing is revoked, a clear message, not an error", async () => {
    const victim = await seedUser(t);
    const device = await connect(tv, victim);
    const attacker = await seedUser(t);
    const own = await connect(tv, attacker);
    const browser = await browserOn(attacker, DEVICES);

    const res = await signOut(browser, device.grantId);
    expect(res.statusCode).toBe(404);
    expect(res.body).toContain('That device is not signed in to your account, so nothing was signed out.');
    expect(res.body).not.toContain('Signed out');
    // The page still lists the user's own devices, and only those.
    expect(hiddenValues(res.body, 'grant_id')).toEqual([own.grantId]);
    expect(await works(device)).toBe(true);
    expect((await grant(device.grantId)).revoked_at).toBeNull();
    expect(await revocations(device.grantId)).toHaveLength(0);
  });

  it('a device already signed out: the same message, nothing recorded twice', async () => {
    const user = await seedUser(t);
    const device = await connect(tv, user);
    const browser = await browserOn(user, DEVICES);
    expect((await signOut(browser, device.grantId)).statusCode).toBe(303);
    const again = await signOut(browser, device.grantId);
    expect(again.statusCode).toBe(404);
    expect(again.body).toContain('It may have been signed out already.');
    expect(await revocations(device.grantId)).toHaveLength(1);
  });

  it.each([['not-a-uuid'], [''], ["1' OR '1'='1"], ['00000000-0000-0000-0000-00000000000g']])(
    'a malformed grant_id (%j) is a 400 page, and nothing changes',
    async (grantId) => {
      const user = await seedUser(t);
      const device = await connect(tv, user);
      const res = await signOut(await browserOn(user, DEVICES), grantId);
      expect(res.statusCode).toBe(400);
      expect(res.headers['content-type']).toMatch(/^text\/html/);
      expect(res.body).toContain('<h1>Bad request</h1>');
      expect(await works(device)).toBe(true);
    },
  );

  it('a missing grant_id is a 400 page', async () => {
    const user = await seedUser(t);
    const res = await (await browserOn(user, DEVICES)).post(`${DEVICES}/sign-out`, {});
    expect(res.statusCode).toBe(400);
    expect(res.body).toContain('parameter grant_id is missing');
  });

  it('a grant_id that names no grant: the not-found message', async () => {
    const user = await seedUser(t);
    const res = await signOut(await browserOn(user, DEVICES), '6f1c1b1e-8d4e-4c7a-9d55-0b8b2f4b9a10');
    expect(res.statusCode).toBe(404);
    expect(res.body).toContain('nothing was signed out');
  });
});

describe('Connected apps page', () => {
  it('lists each app with a live grant once, any kind, with its device count and a Remove access button', async () => {
    const user = await seedUser(t);
    await connect(tv, user);
    await connect(tv, user);
    await connect(bot, user);
    await connect(web, user);
    const gone = await seedApp({ kind: 'tv', name: 'Old Game Console' });
    await stealAndReplay(gone, await connect(gone, user));
    const revokedApp = await seedApp({ kind: 'bot', type: 'confidential', name: 'Revoked Bot' });
    expect((await revoke(t, revokedApp, (await connect(revokedApp, user)).access_token)).statusCode).toBe(200);
    const unused = await seedApp({ kind: 'bot', name: 'Never Connected' });
    await connect(unused, await seedUser(t));

    const browser = await browserOn(user, APPS);
    const page = await browser.get(APPS);
    expect(page.statusCode).toBe(200);
    expect(page.body).toContain('<h1>Connected apps</h1>');
    expect(new Set(hiddenValues(page.body, 'client_id'))).toEqual(new Set([tv.clientId, bot.clientId, web.clientId]));
    expect(rows(page.body)).toHaveLength(3);
    expect(page.body).not.toContain('Old Game Console');
    expect(page.body).not.toContain('Revoked Bot');
    expect(page.body).not.toContain('Never Connected');

    const tvRow = rowOf(page.body, 'client_id', tv.clientId)!;
    expect(tvRow).toContain('<h2 class="app-name">Living Room TV</h2>');
    expect(tvRow).toContain('2 devices · <a href="/account/devices">See devices</a>');
    expect(rowOf(page.body, 'client_id', bot.clientId)).toContain('1 device · <a href="/account/devices">See devices</a>');
    const webRow = rowOf(page.body, 'client_id', web.clientId)!;
    expect(webRow).toContain('<p class="muted kind">Web app</p>');
    expect(webRow).toContain('<dd>On the web</dd>');
    expect(webRow).toMatch(/<time datetime="[^"]+Z">(less than a minute|\d+ minutes?) ago<\/time>/);
    for (const app of [tv, bot, web]) {
      const row = rowOf(page.body, 'client_id', app.clientId)!;
      expect(row).toContain('<form method="post" action="/account/apps/remove">');
      expect(row).toContain(`<input type="hidden" name="csrf_token" value="${browser.csrfToken}">`);
      expect(row).toContain(`<button type="submit" class="danger">Remove access<span class="visually-hidden"> for ${app.name}</span></button>`);
    }
  });

  it('an app whose only grant has expired leaves the list', async () => {
    const user = await seedUser(t);
    await connect(web, user);
    const browser = await browserOn(user, APPS);
    expect(hiddenValues((await browser.get(APPS)).body, 'client_id')).toEqual([web.clientId]);
    t.clock.advance(t.config.accessTokenTtl);
    expect((await browser.get(APPS)).body).toContain('No apps have access to your account.');
  });

  it('escapes app names', async () => {
    const user = await seedUser(t);
    const odd = await seedApp({ kind: 'tv', name: '<img src=x onerror=alert(1)> & "TV"' });
    await connect(odd, user);
    const page = await pageFor(user, APPS);
    expect(page.body).toContain('<h2 class="app-name">&lt;img src=x onerror=alert(1)&gt; &amp; &quot;TV&quot;</h2>');
    expect(page.body).not.toContain('<img');
  });
});

describe('Remove access on the Connected apps page', () => {
  it('revokes every grant of that app for that user, and only those', async () => {
    const user = await seedUser(t);
    const [first, second] = [await connect(tv, user), await connect(tv, user)];
    const botDevice = await connect(bot, user);
    const webSession = await connect(web, user);
    const someoneElses = await connect(tv, await seedUser(t));
    const browser = await browserOn(user, APPS);
    const counted = await revocationsCounted('access_removed');

    const res = await removeAccess(browser, tv.clientId);
    expect(res.statusCode).toBe(303);
    expect(res.headers.location).toBe(`${APPS}?removed=${tv.clientId}`);
    // Both devices of the app stop at once.
    await expectRefused(tv, first);
    await expectRefused(tv, second);
    expect(await revocationsCounted('access_removed')).toBe(counted + 2);
    // Other apps and other users' grants of the same app are untouched.
    expect(await works(botDevice)).toBe(true);
    expect(await works(webSession)).toBe(true);
    expect(await works(someoneElses)).toBe(true);
    await refreshed(t, bot, botDevice.refresh_token!);
    await refreshed(t, tv, someoneElses.refresh_token!);

    const page = await browser.follow(res);
    expect(page.body).toContain('<p class="notice" role="status">Living Room TV no longer has access to your account.</p>');
    expect(new Set(hiddenValues(page.body, 'client_id'))).toEqual(new Set([bot.clientId, web.clientId]));
    for (const device of [first, second]) {
      expect(await grant(device.grantId)).toMatchObject({ revoked_at: t.clock.now(), revoked_reason: 'access_removed' });
      expect(await revocations(device.grantId)).toEqual([{ type: 'grant.revoked', reason: 'access_removed', client_ip: '127.0.0.1' }]);
    }
    for (const device of [botDevice, webSession, someoneElses]) expect((await grant(device.grantId)).revoked_at).toBeNull();
    expect(hiddenValues((await browser.get(DEVICES)).body, 'grant_id')).toEqual([botDevice.grantId]);
  });

  it('works for a web app too', async () => {
    const user = await seedUser(t);
    const webSession = await connect(web, user);
    const res = await removeAccess(await browserOn(user, APPS), web.clientId);
    expect(res.statusCode).toBe(303);
    await expectRefused(web, webSession);
  });

  it('an app the user has not connected (another user has): nothing is revoked, a clear message', async () => {
    const owner = await seedUser(t);
    const theirs = await connect(bot, owner);
    const user = await seedUser(t);
    await connect(web, user);
    const res = await removeAccess(await browserOn(user, APPS), bot.clientId);
    expect(res.statusCode).toBe(404);
    expect(res.body).toContain('That app has no access to your account, so nothing was removed.');
    expect(hiddenValues(res.body, 'client_id')).toEqual([web.clientId]);
    expect(await works(theirs)).toBe(true);
    expect(await revocations(theirs.grantId)).toHaveLength(0);
  });

  it.each([
    ['unknown client', 'tv_nobody', 404],
    ['empty', '', 400],
    ['a NUL byte', 'tv_\u0000', 400],
    ['too long', 'x'.repeat(256), 400],
  ])('client_id %s: %i, not an error', async (_case, clientId, status) => {
    const user = await seedUser(t);
    const device = await connect(tv, user);
    const res = await removeAccess(await browserOn(user, APPS), clientId);
    expect(res.statusCode).toBe(status);
    expect(res.headers['content-type']).toMatch(/^text\/html/);
    expect(await works(device)).toBe(true);
  });
});

describe('CSRF on the account forms', () => {
  const forms = [
    ['Sign out', (b: Browser, d: Device, o: { csrfToken?: string | null }) => signOut(b, d.grantId, o)],
    ['Remove access', (b: Browser, _d: Device, o: { csrfToken?: string | null }) => removeAccess(b, tv.clientId, o)],
  ] as const;
  const tokens = [
    ['without a CSRF token', () => null],
    ['with a wrong CSRF token', () => 'A'.repeat(43)],
  ] as const;

  it.each(forms.flatMap(([name, submit]) => tokens.map(([how, token]) => [name, how, submit, token] as const)))(
    '%s %s: 403 and the device still works, refresh included',
    async (_name, _how, submit, token) => {
      const user = await seedUser(t);
      const device = await connect(tv, user);
      const browser = await browserOn(user, DEVICES);
      const res = await submit(browser, device, { csrfToken: token() });
      expect(res.statusCode).toBe(403);
      expect(res.body).toContain('This form has expired');
      expect(await works(device)).toBe(true);
      expect((await grant(device.grantId)).revoked_at).toBeNull();
      expect(hiddenValues((await browser.get(DEVICES)).body, 'grant_id')).toEqual([device.grantId]);
      await refreshed(t, tv, device.refresh_token!);
    },
  );

  it.each(forms)("%s with another session's valid CSRF token: 403", async (_name, submit) => {
    const user = await seedUser(t);
    const device = await connect(tv, user);
    const browser = await browserOn(user, DEVICES);
    const elsewhere = await browserOn(user, DEVICES);
    const res = await submit(browser, device, { csrfToken: elsewhere.csrfToken });
    expect(res.statusCode).toBe(403);
    expect(await works(device)).toBe(true);
  });
});

describe('notices come from the database, not the address', () => {
  it('?signed_out= of a live grant, or of a grant signed out for another reason, shows no notice', async () => {
    const user = await seedUser(t);
    const live = await connect(tv, user);
    const stolen = await connect(tv, user);
    await stealAndReplay(tv, stolen);
    const browser = await browserOn(user, DEVICES);
    for (const grantId of [live.grantId, stolen.grantId, 'not-a-uuid']) {
      const page = await browser.get(`${DEVICES}?signed_out=${grantId}`);
      expect(page.statusCode).toBe(200);
      expect(page.body).not.toContain('class="notice"');
    }
  });

  it("?signed_out= of another user's signed-out grant shows no notice", async () => {
    const other = await seedUser(t);
    const theirs = await connect(bot, other);
    await signOut(await browserOn(other, DEVICES), theirs.grantId);
    const page = await pageFor(await seedUser(t), `${DEVICES}?signed_out=${theirs.grantId}`);
    expect(page.body).not.toContain('class="notice"');
  });

  it('?removed= of an app that still has access shows no notice', async () => {
    const user = await seedUser(t);
    await connect(tv, user);
    const page = await pageFor(user, `${APPS}?removed=${tv.clientId}`);
    expect(page.body).not.toContain('class="notice"');
  });
});

describe('an app leaves Connected apps when its last device is signed out', () => {
  it('signing out one of two devices keeps the app (1 device); signing out the last removes it', async () => {
    const user = await seedUser(t);
    const [first, second] = [await connect(tv, user), await connect(tv, user)];
    const browser = await browserOn(user, DEVICES);

    await signOut(browser, first.grantId);
    const afterFirst = await browser.get(APPS);
    expect(rowOf(afterFirst.body, 'client_id', tv.clientId)).toContain('1 device ·');

    await browser.get(DEVICES);
    await signOut(browser, second.grantId);
    const afterLast = await browser.get(APPS);
    expect(hiddenValues(afterLast.body, 'client_id')).toEqual([]);
    expect(afterLast.body).toContain('No apps have access to your account.');
  });
});

describe('signed-out visitors', () => {
  it.each([DEVICES, APPS])('GET %s sends them to sign in, and sign-in comes back', async (path) => {
    const user = await seedUser(t);
    const browser = new Browser(t);
    const res = await browser.get(path);
    expect(res.statusCode).toBe(303);
    expect(res.headers.location).toBe(`/signin?return_to=${encodeURIComponent(path)}`);
    await browser.follow(res);
    const signedIn = await browser.post('/signin', { email: user.email, password: user.password, return_to: path });
    expect(signedIn.headers.location).toBe(path);
    expect((await browser.follow(signedIn)).statusCode).toBe(200);
  });

  it.each([
    [`${DEVICES}/sign-out`, DEVICES],
    [`${APPS}/remove`, APPS],
  ])('POST %s from an anonymous session goes to sign-in and changes nothing', async (action, page) => {
    const user = await seedUser(t);
    const device = await connect(tv, user);
    const anonymous = new Browser(t);
    await anonymous.get('/signin');
    const res = await anonymous.post(action, { grant_id: device.grantId, client_id: tv.clientId });
    expect(res.statusCode).toBe(303);
    expect(res.headers.location).toBe(`/signin?return_to=${encodeURIComponent(page)}`);
    expect(await works(device)).toBe(true);
  });

  it('a user banned after signing in is signed out of the account pages', async () => {
    const user = await seedUser(t);
    const browser = await browserOn(user, DEVICES);
    await setUserBannedAt(t.deps.db, user.email, t.clock.now());
    expect((await browser.get(DEVICES)).statusCode).toBe(303);
  });
});

describe('account page security headers', () => {
  it.each([DEVICES, APPS])('%s: CSP with frame-ancestors none, no referrer, nosniff, no-store', async (path) => {
    const res = await pageFor(await seedUser(t), path);
    expect(res.headers['content-security-policy']).toContain("frame-ancestors 'none'");
    expect(res.headers['referrer-policy']).toBe('no-referrer');
    expect(res.headers['x-content-type-options']).toBe('nosniff');
    expect(res.headers['cache-control']).toBe('no-store');
  });
});
