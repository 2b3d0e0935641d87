import { describe, expect, it } from 'vitest';
import type { Geo, Place } from '../../src/geo/locate.js';
import { refreshedElsewhere } from '../../src/oauth/device/proximity.js';

/** Issue 27 §3: what a device grant's refresh records of where it came from, judged from memory. */

const PLACES: Record<string, Partial<Place>> = {
  '198.51.100.7': { country: 'DE', asn: 3320, hosting: false },
  '203.0.113.9': { country: 'KR', asn: 16509, hosting: true },
};

/** A location lookup over PLACES that counts its calls. */
function countingGeo(): Geo & { lookups: number } {
  const geo = {
    lookups: 0,
    locate(address: string): Place {
      geo.lookups++;
      const known = PLACES[address];
      return {
        address,
        kind: known ? 'public' : 'unknown',
        country: null,
        countryName: null,
        city: null,
        asn: null,
        network: null,
        hosting: false,
        relay: false,
        ...known,
      } as Place;
    },
  };
  return geo as Geo & { lookups: number };
}

describe('refreshedElsewhere', () => {
  it('records a refresh from a hosting network in another country than the approver', () => {
    const geo = countingGeo();
    expect(refreshedElsewhere(geo, { approverIp: '198.51.100.7', previousIp: '198.51.100.7' }, '203.0.113.9')).toEqual(['country_mismatch', 'hosting_network']);
  });

  it('locates nothing for a refresh from the address of the previous use, which was judged then', () => {
    const geo = countingGeo();
    expect(refreshedElsewhere(geo, { approverIp: '198.51.100.7', previousIp: '203.0.113.9' }, '203.0.113.9')).toBeNull();
    expect(geo.lookups).toBe(0);
  });

  it('records nothing for a grant that no approver made (not the device flow)', () => {
    const geo = countingGeo();
    expect(refreshedElsewhere(geo, { approverIp: null, previousIp: null }, '203.0.113.9')).toBeNull();
    expect(geo.lookups).toBe(0);
  });
});
