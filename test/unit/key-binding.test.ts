import { describe, expect, it } from 'vitest';
import { keyProven } from '../../src/oauth/grant-types/key-binding.js';

const KEY = 'k'.repeat(43);
const OTHER = 'o'.repeat(43);

describe('a bound grant needs its key (RFC 9449 §5, §10)', () => {
  it.each([
    ['unbound, no proof', null, null, true],
    ['unbound, any proof', null, OTHER, true],
    ['bound, a proof of its key', KEY, KEY, true],
    ['bound, no proof', KEY, null, false],
    ['bound, a proof of another key', KEY, OTHER, false],
  ])('%s -> %s', (_case, bound, proven, allowed) => {
    expect(keyProven(bound, proven)).toBe(allowed);
  });
});
