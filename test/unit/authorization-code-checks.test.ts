import { describe, expect, it } from 'vitest';
import { codeMisfit, couldBeOurCode, type RedeemedCode } from '../../src/oauth/grant-types/authorization-code.rules.js';

const NOW = new Date('2026-11-26T12:00:00Z');
const REDIRECT = 'https://app.example/callback';
const KEY = 'k'.repeat(43);

/** A code its statement redeemed: unbound, a minute left. */
const CODE: RedeemedCode = { expires_at: new Date(NOW.getTime() + 60_000), redirect_uri: REDIRECT, dpop_jkt: null };

describe("a redeemed authorization code's checks (OAuth 2.1 §4.1.3, RFC 9449 §10)", () => {
  it.each([
    ['the same redirect_uri, unbound, in time', {}, {}, null],
    ['expired at this very instant', { expires_at: NOW }, {}, 'expired'],
    ['another redirect_uri', {}, { redirectUri: 'https://app.example/other' }, 'redirect_uri'],
    ['no redirect_uri, though the code was requested with one', {}, { redirectUri: undefined }, 'redirect_uri'],
    ['a redirect_uri differing only in case', {}, { redirectUri: REDIRECT.toUpperCase() }, 'redirect_uri'],
    ['bound, redeemed with its key', { dpop_jkt: KEY }, { dpopJkt: KEY }, null],
    ['bound, redeemed without a proof', { dpop_jkt: KEY }, {}, 'dpop_key'],
    ['bound, redeemed with another key', { dpop_jkt: KEY }, { dpopJkt: 'o'.repeat(43) }, 'dpop_key'],
    ['unbound, redeemed with a proof', {}, { dpopJkt: KEY }, null],
    ['expired, another redirect_uri and no key: expiry first', { expires_at: NOW, dpop_jkt: KEY }, { redirectUri: 'x' }, 'expired'],
    ['another redirect_uri and no key: the redirect_uri first', { dpop_jkt: KEY }, { redirectUri: 'x' }, 'redirect_uri'],
  ] as const)('%s -> %s', (_case, code, request, misfit) => {
    expect(codeMisfit({ ...CODE, ...code }, { redirectUri: REDIRECT, dpopJkt: null, now: NOW, ...request })).toBe(misfit);
  });
});

describe('what is looked up at all', () => {
  it.each([
    [`da_ac_${'a'.repeat(43)}`, true],
    [`da_ac_${'a'.repeat(250)}`, true],
    [`da_ac_${'a'.repeat(251)}`, false],
    [`da_rt_${'a'.repeat(43)}`, false],
    ['', false],
  ])('%s could be ours: %s', (value, ours) => {
    expect(couldBeOurCode(value)).toBe(ours);
  });
});
