import { describe, expect, it } from 'vitest';
import { addressKey, addressPrefixes } from '../../src/lib/client-address.js';

describe('per-address limits count IPv4 by address and IPv6 by prefix', () => {
  it.each([
    ['203.0.113.7', 64, '203.0.113.7'],
    ['::ffff:203.0.113.7', 64, '203.0.113.7'],
    ['::ffff:cb00:7107', 64, '203.0.113.7'],
    ['2001:db8:1:2:3:4:5:6', 64, '2001:db8:1:2:0:0:0:0/64'],
    ['2001:db8:1:2::1', 64, '2001:db8:1:2:0:0:0:0/64'],
    ['2001:DB8:1:2:ffff:ffff:ffff:ffff', 64, '2001:db8:1:2:0:0:0:0/64'],
    ['2001:db8:1:2::1', 56, '2001:db8:1:0:0:0:0:0/56'],
    ['2001:db8:1:2ff::1', 56, '2001:db8:1:200:0:0:0:0/56'],
    ['2001:db8::1', 128, '2001:db8:0:0:0:0:0:1/128'],
    ['fe80::1%eth0', 64, 'fe80:0:0:0:0:0:0:0/64'],
    ['64:ff9b::192.0.2.1', 96, '64:ff9b:0:0:0:0:0:0/96'],
    ['::1', 64, '0:0:0:0:0:0:0:0/64'],
  ])('%s with prefix %i counts as %s', (ip, prefix, key) => {
    expect(addressKey(ip, prefix)).toBe(key);
  });

  it('two addresses of one /64 share a key; neighbouring /64s do not', () => {
    expect(addressKey('2001:db8:a:b::1', 64)).toBe(addressKey('2001:db8:a:b:ffff::9', 64));
    expect(addressKey('2001:db8:a:b::1', 64)).not.toBe(addressKey('2001:db8:a:c::1', 64));
  });

  it('what is not an address is kept, bounded in length', () => {
    expect(addressKey('x'.repeat(1000), 64)).toHaveLength(64);
    expect(addressKey('not:an:address', 64)).toBe('not:an:address');
  });
});

describe('a shared budget weighs a client by each network it belongs to', () => {
  it.each([
    ['203.0.113.7', ['203.0.113.7', '203.0.113.0/24']],
    ['::ffff:203.0.113.7', ['203.0.113.7', '203.0.113.0/24']],
    ['2001:db8:1:2ff::1', ['2001:db8:1:2ff:0:0:0:0/64', '2001:db8:1:200:0:0:0:0/56', '2001:db8:1:0:0:0:0:0/48']],
    ['fe80::1%eth0', ['fe80:0:0:0:0:0:0:0/64', 'fe80:0:0:0:0:0:0:0/56', 'fe80:0:0:0:0:0:0:0/48']],
    ['not an address', ['not an address']],
  ])('%s belongs to %j', (ip, prefixes) => {
    expect(addressPrefixes(ip)).toEqual(prefixes);
  });

  it('forty /64s of one /56 share their /56 and /48, and nothing narrower', () => {
    const all = Array.from({ length: 40 }, (_, i) => addressPrefixes(`2001:db8:7:${(0x4400 + i).toString(16)}::1`));
    expect(new Set(all.map((p) => p[0])).size).toBe(40);
    expect(new Set(all.map((p) => p[1])).size).toBe(1);
    expect(new Set(all.map((p) => p[2])).size).toBe(1);
  });
});
