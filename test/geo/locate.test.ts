import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';
import { GeoDatabaseError, loadGeo, shippedOrganisation, type Geo, type Place } from '../../src/geo/locate.js';
import { HOSTING_NETWORKS } from '../../src/geo/hosting-networks.js';
import { RELAY_NETWORKS } from '../../src/geo/relay-networks.js';
import { startTestApp } from '../helpers/app.js';
import { createTestDatabase } from '../helpers/database.js';
import { writeMmdb } from '../helpers/mmdb-writer.js';

const require = createRequire(import.meta.url);
const SHIPPED_COUNTRY_DATABASE = require.resolve('@ip-location-db/geo-whois-asn-country-mmdb/geo-whois-asn-country.mmdb');

const folder = mkdtempSync(path.join(tmpdir(), 'device-auth-geo-'));
afterAll(() => rmSync(folder, { recursive: true, force: true }));

let geo: Geo;
beforeAll(async () => {
  geo = await loadGeo({});
});

const nowhere = { country: null, countryName: null, city: null, asn: null, network: null, hosting: false, relay: false };

function place(address: string, fields: Partial<Place>): Place {
  return { address, kind: 'public', ...nowhere, ...fields };
}

describe('public addresses: country and network from the shipped data', () => {
  it.each([
    ['8.8.8.8', place('8.8.8.8', { country: 'US', countryName: 'United States', asn: 15169, network: 'Google LLC', hosting: true })],
    // APNIC registered 1.1.1.0/24 in Australia (a research prefix lent to Cloudflare): whois says AU.
    ['1.1.1.1', place('1.1.1.1', { country: 'AU', countryName: 'Australia', asn: 13335, network: 'Cloudflare, Inc.', relay: true })],
    // Cloudflare WARP egress: the whois country follows the egress, the AS is one for all of them.
    ['104.28.13.1', place('104.28.13.1', { country: 'SG', countryName: 'Singapore', asn: 13335, network: 'Cloudflare, Inc.', relay: true })],
    ['2a09:bac0::1', place('2a09:bac0::1', { country: 'US', countryName: 'United States', asn: 13335, network: 'Cloudflare, Inc.', relay: true })],
    ['165.225.0.1', place('165.225.0.1', { country: 'US', countryName: 'United States', asn: 22616, network: 'ZSCALER, INC.', relay: true })],
    ['88.198.0.1', place('88.198.0.1', { country: 'DE', countryName: 'Germany', asn: 24940, network: 'Hetzner Online GmbH', hosting: true })],
    ['79.192.0.1', place('79.192.0.1', { country: 'DE', countryName: 'Germany', asn: 3320, network: 'Deutsche Telekom AG' })],
    ['5.101.96.1', place('5.101.96.1', { country: 'NL', countryName: 'Netherlands', asn: 14061, network: 'DigitalOcean, LLC', hosting: true })],
    ['2a01:4f8::1', place('2a01:4f8::1', { country: 'DE', countryName: 'Germany', asn: 24940, network: 'Hetzner Online GmbH', hosting: true })],
    ['2003:e4::1', place('2003:e4::1', { country: 'DE', countryName: 'Germany', asn: 3320, network: 'Deutsche Telekom AG' })],
    ['2600:1f18::1', place('2600:1f18::1', { country: 'US', countryName: 'United States', asn: 14618, network: 'Amazon.com, Inc.', hosting: true })],
  ])('%s', (address, expected) => {
    expect(geo.locate(address)).toEqual(expected);
  });

  it('a hosting network is told apart from a home ISP in the same country', () => {
    const server = geo.locate('88.198.0.1');
    const home = geo.locate('79.192.0.1');
    expect(server.country).toBe(home.country);
    expect([server.hosting, home.hosting]).toEqual([true, false]);
  });

  it.each([
    // 88.198.0.0/16 is one range of AS24940; its neighbours belong to other networks.
    ['88.198.0.0', 24940],
    ['88.198.255.255', 24940],
    ['88.197.255.255', 5432],
    ['88.199.0.0', 20960],
    ['2003::', 3320],
    ['2003:1ff:ffff:ffff:ffff:ffff:ffff:ffff', 3320],
  ])('the edges of a range: %s is AS%i', (address, asn) => {
    expect(geo.locate(address).asn).toBe(asn);
  });

  it.each([
    ['1.0.1.1', 'CN'],
    ['2003:200::', 'DE'],
  ])('%s, in no announced range, has a country (%s) but no network', (address, country) => {
    expect(geo.locate(address)).toEqual(place(address, { country, countryName: expect.any(String) as string }));
  });
});

describe('the address as given, normalised', () => {
  it.each(['::ffff:8.8.8.8', '::ffff:808:808', '::FFFF:8.8.8.8'])('IPv4-mapped %s is 8.8.8.8', (mapped) => {
    expect(geo.locate(mapped)).toEqual(geo.locate('8.8.8.8'));
  });

  it.each([
    ['2A01:04F8:0000:0000::0001', '2a01:4f8::1'],
    ['2a01:4f8:0:0:0:0:0:1', '2a01:4f8::1'],
    ['2003:e4:0:0:1:0:0:1', '2003:e4::1:0:0:1'],
  ])('IPv6 %s is written canonically (RFC 5952) as %s', (given, canonical) => {
    expect(geo.locate(given).address).toBe(canonical);
  });
});

describe('addresses that are nowhere on the map say so plainly', () => {
  it.each([
    ['10.0.0.1', 'private', '10.0.0.1'],
    ['172.16.5.4', 'private', '172.16.5.4'],
    ['192.168.1.1', 'private', '192.168.1.1'],
    ['100.64.0.1', 'private', '100.64.0.1'],
    ['fc00::1', 'private', 'fc00::1'],
    ['fd12:3456::1', 'private', 'fd12:3456::1'],
    ['::ffff:10.0.0.1', 'private', '10.0.0.1'],
    ['127.0.0.1', 'loopback', '127.0.0.1'],
    ['127.8.8.8', 'loopback', '127.8.8.8'],
    ['::1', 'loopback', '::1'],
    ['::ffff:127.0.0.1', 'loopback', '127.0.0.1'],
    ['169.254.169.254', 'link-local', '169.254.169.254'],
    ['fe80::1', 'link-local', 'fe80::1'],
    ['fe80::1%eth0', 'link-local', 'fe80::1'],
    ['0.0.0.0', 'unknown', '0.0.0.0'],
    ['192.0.2.1', 'unknown', '192.0.2.1'],
    ['224.0.0.1', 'unknown', '224.0.0.1'],
    ['255.255.255.255', 'unknown', '255.255.255.255'],
    ['::', 'unknown', '::'],
    ['2001:db8::1', 'unknown', '2001:db8::1'],
    ['ff02::1', 'unknown', 'ff02::1'],
    ['4000::1', 'unknown', '4000::1'],
  ])('%s is %s', (address, kind, shown) => {
    expect(geo.locate(address)).toEqual({ address: shown, kind, ...nowhere });
  });

  it.each([['not-an-ip'], [''], ['\0'], ['8.8.8.8\0'], [' 8.8.8.8'], ['8.8.8.8/24'], ['1.2.3'], ['01.02.03.04'], ['\uD800'], ['fe80::1%']])(
    '%j is no address: unknown, shown as given',
    (given) => {
      expect(geo.locate(given)).toEqual({ address: given, kind: 'unknown', ...nowhere });
    },
  );

  it('a long text that is no address is cut to 64 characters, whole characters only', () => {
    expect(geo.locate('x'.repeat(10_000)).address).toBe('x'.repeat(64));
    expect(Array.from(geo.locate('😀'.repeat(100)).address)).toHaveLength(64);
  });
});

describe('speed and sharing', () => {
  it('10,000 lookups of public IPv4 and IPv6 addresses take well under a second', () => {
    const addresses = Array.from({ length: 10_000 }, (_, i) =>
      i % 2 === 0 ? `${(i % 223) + 1}.${(i * 7) % 256}.${(i * 13) % 256}.${i % 256}` : `2a01:4f8:${(i % 0xffff).toString(16)}::${i.toString(16)}`,
    );
    const started = performance.now();
    let located = 0;
    for (const address of addresses) if (geo.locate(address).country !== null) located++;
    const elapsedMs = performance.now() - started;
    expect(located).toBeGreaterThan(9_000);
    expect(elapsedMs).toBeLessThan(500);
  });

  it('a second loadGeo in the same process reuses the loaded data', async () => {
    const started = performance.now();
    const again = await loadGeo({});
    expect(performance.now() - started).toBeLessThan(50);
    expect(again.locate('88.198.0.1')).toEqual(geo.locate('88.198.0.1'));
  });
});

describe('the hosting list', () => {
  it('every hosting ASN is named in the shipped ASN data as the list says, once', async () => {
    for (const entry of HOSTING_NETWORKS) {
      expect({ asn: entry.asn, organisation: await shippedOrganisation(entry.asn) }).toEqual({ asn: entry.asn, organisation: entry.organisation });
    }
    expect(new Set(HOSTING_NETWORKS.map((entry) => entry.asn)).size).toBe(HOSTING_NETWORKS.length);
  });

  it('networks left off on purpose are not hosting: Cloudflare (WARP), Akamai CDN, Hurricane Electric', () => {
    for (const asn of [13335, 20940, 6939]) expect(HOSTING_NETWORKS.some((entry) => entry.asn === asn)).toBe(false);
    expect(geo.locate('1.1.1.1').hosting).toBe(false);
  });
});

describe('the relay list (relay, VPN and CDN egress)', () => {
  it('every relay ASN is named in the shipped ASN data as the list says, once, and none is also a hosting network', async () => {
    for (const entry of RELAY_NETWORKS) {
      expect({ asn: entry.asn, organisation: await shippedOrganisation(entry.asn) }).toEqual({ asn: entry.asn, organisation: entry.organisation });
    }
    expect(new Set(RELAY_NETWORKS.map((entry) => entry.asn)).size).toBe(RELAY_NETWORKS.length);
    const hosting = new Set(HOSTING_NETWORKS.map((entry) => entry.asn));
    expect(RELAY_NETWORKS.filter((entry) => hosting.has(entry.asn))).toEqual([]);
  });

  it("a trusted proxy's own address is of kind proxy and located nowhere, other addresses as before", async () => {
    const behindProxy = await loadGeo({ trustedProxies: ['104.28.0.0/16', '2a09:bac0::/29', 'loopback'] });
    expect(behindProxy.locate('104.28.13.1')).toEqual({ ...place('104.28.13.1', {}), kind: 'proxy' });
    expect(behindProxy.locate('2a09:bac1::7').kind).toBe('proxy');
    expect(behindProxy.locate('104.29.0.1').kind).toBe('public');
    expect(behindProxy.locate('::ffff:104.28.0.1').kind).toBe('proxy');
  });
});

describe('GEOIP_DATABASE: city names from a MaxMind City database', () => {
  // Invented records in a database this test writes: MaxMind's own files may not be shipped.
  const cityDatabase = path.join(folder, 'Test-City.mmdb');
  writeFileSync(
    cityDatabase,
    writeMmdb({
      databaseType: 'GeoLite2-City',
      networks: [
        { network: '88.198.0.0/16', data: { city: { names: { en: 'Helsinki', de: 'Helsinki' } }, country: { iso_code: 'FI', names: { en: 'Finland' } } } },
        { network: '2a01:4f8::/32', data: { city: { names: { en: 'Falkenstein' } }, country: { iso_code: 'DE', names: { en: 'Germany' } } } },
        { network: '79.192.0.0/10', data: { country: { iso_code: 'DE', names: { en: 'Germany' } } } },
      ],
    }),
  );

  it('gives the city, and its country wins over the shipped one; the network still comes from the shipped data', async () => {
    const withCities = await loadGeo({ cityDatabase });
    expect(withCities.locate('88.198.0.1')).toEqual(
      place('88.198.0.1', { country: 'FI', countryName: 'Finland', city: 'Helsinki', asn: 24940, network: 'Hetzner Online GmbH', hosting: true }),
    );
    expect(withCities.locate('2a01:4f8::1')).toMatchObject({ country: 'DE', city: 'Falkenstein', asn: 24940 });
    expect(withCities.locate('::ffff:88.198.0.1')).toMatchObject({ address: '88.198.0.1', city: 'Helsinki' });
  });

  it('an address the City database has without a city, or does not have, keeps city null', async () => {
    const withCities = await loadGeo({ cityDatabase });
    expect(withCities.locate('79.192.0.1')).toMatchObject({ country: 'DE', city: null, asn: 3320 });
    expect(withCities.locate('8.8.8.8')).toEqual(geo.locate('8.8.8.8'));
  });

  it('without it, city is null', () => {
    expect(geo.locate('88.198.0.1').city).toBeNull();
  });

  it('a missing file stops loadConfig with one line naming GEOIP_DATABASE', () => {
    const missing = path.join(folder, 'GeoLite2-City.mmdb');
    expect(() => loadConfig({ GEOIP_DATABASE: missing })).toThrow(ConfigError);
    expect(() => loadConfig({ GEOIP_DATABASE: missing })).toThrow(`invalid configuration: GEOIP_DATABASE: cannot read ${missing} (ENOENT)`);
    expect(() => loadConfig({ GEOIP_DATABASE: folder })).toThrow(`invalid configuration: GEOIP_DATABASE: ${folder} is not a file`);
    expect(loadConfig({ GEOIP_DATABASE: cityDatabase }).geoipDatabase).toBe(cityDatabase);
    expect(loadConfig({}).geoipDatabase).toBeUndefined();
  });

  it('a file that is no MaxMind database, or not a City one, is refused saying which', async () => {
    const text = path.join(folder, 'not-a-database.mmdb');
    writeFileSync(text, 'hello\n');
    await expect(loadGeo({ cityDatabase: text })).rejects.toThrow(new GeoDatabaseError(`${text} is not a MaxMind DB file`));
    await expect(loadGeo({ cityDatabase: SHIPPED_COUNTRY_DATABASE })).rejects.toThrow(
      `${SHIPPED_COUNTRY_DATABASE} is a "country ipvAll" database; a City database (e.g. GeoLite2-City.mmdb) is needed`,
    );
  });
});

describe('createDeps', () => {
  it('gives every part of the server the same lookup, with the City database when configured', async () => {
    const cityDatabase = path.join(folder, 'Deps-City.mmdb');
    writeFileSync(
      cityDatabase,
      writeMmdb({ databaseType: 'GeoIP2-City', networks: [{ network: '88.198.0.0/16', data: { city: { names: { en: 'Nuremberg' } } } }] }),
    );
    const app = await startTestApp({ env: { GEOIP_DATABASE: cityDatabase } });
    try {
      expect(app.deps.geo.locate('88.198.0.1')).toMatchObject({ country: 'DE', city: 'Nuremberg', network: 'Hetzner Online GmbH', hosting: true });
    } finally {
      await app.close();
    }
  });

  it('a City database that cannot be used stops it with a ConfigError naming GEOIP_DATABASE', async () => {
    const database = await createTestDatabase();
    try {
      await expect(startTestApp({ database, env: { GEOIP_DATABASE: SHIPPED_COUNTRY_DATABASE } })).rejects.toThrow(
        new ConfigError(
          `invalid configuration: GEOIP_DATABASE: ${SHIPPED_COUNTRY_DATABASE} is a "country ipvAll" database; a City database (e.g. GeoLite2-City.mmdb) is needed`,
        ),
      );
    } finally {
      await database.drop();
    }
  });
});
