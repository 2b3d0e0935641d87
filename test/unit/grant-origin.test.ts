import { describe, expect, it } from 'vitest';
import { isCountryCode } from '../../src/geo/countries.js';
import { approvalOf, placeOrigin } from '../../src/oauth/grant-origin.js';

/** Issue 31 §1: what a grant keeps of its origin is bounded and read defensively, whatever it was given. */

describe('a grant origin', () => {
  it.each([
    [
      'a decision of this release',
      { signals: ['country_mismatch', 'hosting_network'], action: 'confirm', confirmed: true },
      { approvalSignals: ['country_mismatch', 'hosting_network'], decision: 'confirm', confirmed: true },
    ],
    ['a decision recorded before the box was', { signals: [], action: 'allow' }, { approvalSignals: [], decision: 'allow', confirmed: null }],
    [
      'unknown signals and actions',
      { signals: ['phished', 7, 'relay_network'], action: 'maybe', confirmed: 'yes' },
      { approvalSignals: ['relay_network'], decision: null, confirmed: null },
    ],
    ['no decision recorded', null, { approvalSignals: null, decision: null, confirmed: null }],
    ['not an object', 'confirm', { approvalSignals: null, decision: null, confirmed: null }],
  ])('approvalOf: %s', (_name, context, expected) => {
    expect(approvalOf(context)).toEqual(expected);
  });

  it('placeOrigin keeps only what the table accepts: a code for a country, an AS in range, bounded texts', () => {
    expect(placeOrigin({ address: 'x'.repeat(100), asn: 4294967296, network: 'n'.repeat(300), country: 'kr', hosting: true })).toEqual({
      address: 'x'.repeat(64),
      asn: null,
      network: 'n'.repeat(200),
      country: null,
      hosting: true,
    });
    expect(placeOrigin({ address: '3.34.0.1', asn: 16509, network: 'Amazon.com, Inc.', country: 'KR', hosting: true })).toEqual({
      address: '3.34.0.1',
      asn: 16509,
      network: 'Amazon.com, Inc.',
      country: 'KR',
      hosting: true,
    });
  });

  it.each([
    ['DE', true],
    ['KR', true],
    ['AX', true],
    ['ZZ', false],
    ['EU', false],
    ['XK', false],
    ['de', false],
    ['D', false],
  ])('isCountryCode(%s) is %s (ISO 3166-1 alpha-2)', (code, known) => {
    expect(isCountryCode(code)).toBe(known);
  });
});
