import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { open as openMaxMindDb, Reader, type CityResponse, type Response } from 'maxmind';
import { AsnTable } from './asn-table.js';
import { HOSTING_NETWORKS } from './hosting-networks.js';
import { RELAY_NETWORKS } from './relay-networks.js';
import { addressMatcher, classify, parseAddress, type AddressKind } from './ip-address.js';

export type { AddressKind } from './ip-address.js';

/** 'proxy': one of the server's own trusted proxies (TRUST_PROXY), which says nothing of who is behind it. */
export type PlaceKind = AddressKind | 'proxy';

export interface Place {
  /** As given, except: an IPv4-mapped IPv6 address becomes the IPv4 address, IPv6 is canonical (RFC 5952), and text that is no address is cut to 64 characters. */
  address: string;
  /** 'unknown' = not an IP address, or reserved/unroutable otherwise. Only 'public' is ever located. */
  kind: PlaceKind;
  /** ISO 3166-1 alpha-2, e.g. 'DE'. */
  country: string | null;
  /** English name, e.g. 'Germany'. */
  countryName: string | null;
  /** Only with GEOIP_DATABASE (a MaxMind City database); else null. */
  city: string | null;
  asn: number | null;
  /** The AS organisation, e.g. 'Hetzner Online GmbH'. */
  network: string | null;
  /** The AS is on the hosting/datacenter list (src/geo/hosting-networks.ts). */
  hosting: boolean;
  /** The AS is on the relay/VPN/CDN egress list (src/geo/relay-networks.ts): shared by many unrelated people. */
  relay: boolean;
}

export interface Geo {
  locate(address: string): Place;
}

/** A City database that cannot be used; the message says why, for the operator. */
export class GeoDatabaseError extends Error {}

/** Who made the shipped data; CC BY 4.0 asks for this credit wherever its results are shown. */
export const GEO_DATA_CREDITS = [
  { name: 'RouteViews', url: 'https://www.routeviews.org/', licence: 'CC BY 4.0', covers: 'address to AS number' },
  { name: 'DB-IP', url: 'https://db-ip.com', licence: 'CC BY 4.0', covers: 'AS numbers and organisation names' },
  { name: 'NRO (the five Regional Internet Registries)', url: 'https://www.nro.net/', licence: 'CC BY 4.0', covers: 'address to AS number and country' },
  {
    name: 'ip-location-db',
    url: 'https://github.com/sapics/ip-location-db',
    licence: 'CC0 1.0 (country file), CC BY 4.0 (ASN files)',
    covers: 'the merged files',
  },
] as const;

const require = createRequire(import.meta.url);

const COUNTRY_DATABASE = '@ip-location-db/geo-whois-asn-country-mmdb/geo-whois-asn-country.mmdb';
const ASN_IPV4_CSV = '@ip-location-db/asn/asn-ipv4.csv';
const ASN_IPV6_CSV = '@ip-location-db/asn/asn-ipv6.csv';

/** The shipped country database's records, a shape of its own (not MaxMind's). */
interface CountryRecord {
  country_code?: unknown;
}

interface ShippedData {
  countries: Reader<Response>;
  asns: AsnTable;
}

/*
 * Loading the shipped data takes a few hundred milliseconds (most of it reading the ASN table) and
 * the data never changes while the process runs, so every loadGeo in a process shares one copy:
 * the test suite creates many sets of dependencies per process, and a server creates one.
 */
let shipped: Promise<ShippedData> | null = null;

function loadShippedData(): Promise<ShippedData> {
  shipped ??= (async () => {
    const [countries, ipv4Csv, ipv6Csv] = await Promise.all([
      openMaxMindDb(require.resolve(COUNTRY_DATABASE)),
      readFile(require.resolve(ASN_IPV4_CSV)),
      readFile(require.resolve(ASN_IPV6_CSV)),
    ]);
    return { countries, asns: AsnTable.fromCsv(ipv4Csv, ipv6Csv) };
  })().catch((error: unknown) => {
    // A failed load (a missing package) is not remembered: the next caller tries again.
    shipped = null;
    throw error;
  });
  return shipped;
}

/** loadShippedData, read synchronously (for geoOnFirstUse); shares the one copy either way. */
function loadShippedDataSync(): ShippedData {
  const data = {
    countries: new Reader<Response>(readFileSync(require.resolve(COUNTRY_DATABASE))),
    asns: AsnTable.fromCsv(readFileSync(require.resolve(ASN_IPV4_CSV)), readFileSync(require.resolve(ASN_IPV6_CSV))),
  };
  shipped ??= Promise.resolve(data);
  return data;
}

function unreadableCityDatabase(path: string, error: unknown): GeoDatabaseError {
  const code = (error as NodeJS.ErrnoException).code;
  return new GeoDatabaseError(code ? `cannot read ${path} (${code})` : `${path} is not a MaxMind DB file`);
}

async function openCityDatabase(path: string): Promise<Reader<CityResponse>> {
  let reader: Reader<CityResponse>;
  try {
    reader = await openMaxMindDb<CityResponse>(path);
  } catch (error) {
    throw unreadableCityDatabase(path, error);
  }
  return checkCityDatabase(path, reader);
}

function openCityDatabaseSync(path: string): Reader<CityResponse> {
  let reader: Reader<CityResponse>;
  try {
    reader = new Reader<CityResponse>(readFileSync(path));
  } catch (error) {
    throw unreadableCityDatabase(path, error);
  }
  return checkCityDatabase(path, reader);
}

function checkCityDatabase(path: string, reader: Reader<CityResponse>): Reader<CityResponse> {
  const type: unknown = reader.metadata.databaseType;
  if (typeof type !== 'string') throw new GeoDatabaseError(`${path} is not a MaxMind DB file`);
  // GeoIP2/GeoLite2 City, GeoIP2 Enterprise and DB-IP's City Lite all carry city names.
  if (!/city|enterprise/i.test(type)) {
    throw new GeoDatabaseError(`${path} is a "${type}" database; a City database (e.g. GeoLite2-City.mmdb) is needed`);
  }
  return reader;
}

const hostingAsns: ReadonlySet<number> = new Set(HOSTING_NETWORKS.map((entry) => entry.asn));
const relayAsns: ReadonlySet<number> = new Set(RELAY_NETWORKS.map((entry) => entry.asn));
const regionNames = new Intl.DisplayNames(['en'], { type: 'region', fallback: 'none' });
const countryNames = new Map<string, string | null>();

function countryName(code: string): string | null {
  let name = countryNames.get(code);
  if (name === undefined) {
    name = regionNames.of(code) ?? null;
    countryNames.set(code, name);
  }
  return name;
}

/** ISO 3166-1 alpha-2 only: 'ZZ' is "unknown" in these data sets, which is no country. */
function countryCode(value: unknown): string | null {
  return typeof value === 'string' && /^[A-Z]{2}$/.test(value) && value !== 'ZZ' ? value : null;
}

/** Longer than any IP address with a zone; beyond it the text is no address and the rest says nothing. */
const MAX_ECHOED = 64;

function notAnAddress(given: string): Place {
  const address = given.length > MAX_ECHOED ? Array.from(given).slice(0, MAX_ECHOED).join('') : given;
  return { address, kind: 'unknown', country: null, countryName: null, city: null, asn: null, network: null, hosting: false, relay: false };
}

/**
 * Country and network of an address from the data shipped as npm packages, loaded once per
 * process; with `cityDatabase` (GEOIP_DATABASE), also its city. No lookup leaves the machine.
 * A City database that cannot be used rejects with GeoDatabaseError. An address of `trustedProxies`
 * (TRUST_PROXY's addresses and networks) is of kind 'proxy' and located nowhere: a request that
 * shows the proxy's own address came through it without saying from where.
 */
export async function loadGeo(options: { cityDatabase?: string | undefined; trustedProxies?: readonly string[] | undefined }): Promise<Geo> {
  const [data, city] = await Promise.all([loadShippedData(), options.cityDatabase === undefined ? null : openCityDatabase(options.cityDatabase)]);
  return locator(data, city, options.trustedProxies ?? []);
}

/**
 * loadGeo, but the data is read (synchronously) at the first locate(): for the CLI, most of whose
 * commands never locate anything and should not pay a few hundred milliseconds for it. A City
 * database that cannot be used throws GeoDatabaseError at that first locate().
 */
export function geoOnFirstUse(options: { cityDatabase?: string | undefined; trustedProxies?: readonly string[] | undefined }): Geo {
  let geo: Geo | null = null;
  return {
    locate(given: string): Place {
      geo ??= locator(
        loadShippedDataSync(),
        options.cityDatabase === undefined ? null : openCityDatabaseSync(options.cityDatabase),
        options.trustedProxies ?? [],
      );
      return geo.locate(given);
    },
  };
}

function locator({ countries, asns }: ShippedData, city: Reader<CityResponse> | null, trustedProxies: readonly string[]): Geo {
  const isTrustedProxy = addressMatcher(trustedProxies);
  return {
    locate(given: string): Place {
      const parsed = parseAddress(given);
      if (parsed === null) return notAnAddress(given);
      const kind = isTrustedProxy(parsed) ? 'proxy' : classify(parsed);
      const place: Place = { address: parsed.text, kind, country: null, countryName: null, city: null, asn: null, network: null, hosting: false, relay: false };
      if (kind !== 'public') return place;
      const cityRecord = city?.get(parsed.text) ?? null;
      // MaxMind's country is the better one where it has the address: and city and country then agree.
      place.country = countryCode(cityRecord?.country?.iso_code) ?? countryCode((countries.get(parsed.text) as CountryRecord | null)?.country_code);
      place.countryName = place.country === null ? null : countryName(place.country);
      place.city = cityRecord?.city?.names?.en ?? null;
      place.asn = parsed.version === 4 ? asns.findIPv4(parsed.value) : asns.findIPv6(parsed.words);
      if (place.asn !== null) {
        place.network = asns.organisation(place.asn);
        place.hosting = hostingAsns.has(place.asn);
        place.relay = relayAsns.has(place.asn);
      }
      return place;
    },
  };
}

/** For tests of the hosting list against the data: the organisation the shipped data names for an AS. */
export async function shippedOrganisation(asn: number): Promise<string | null> {
  return (await loadShippedData()).asns.organisation(asn);
}
