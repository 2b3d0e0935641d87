import { describe, expect, it } from 'vitest';
import { AsnTable } from '../../src/geo/asn-table.js';

const csv = (text: string) => Buffer.from(text, 'utf8');
const ipv4 = (text: string) => text.split('.').reduce((value, octet) => value * 256 + Number(octet), 0);
const ipv6 = (...words: number[]) => Uint32Array.from(words);

describe('the ASN table read from the shipped CSV format', () => {
  const table = AsnTable.fromCsv(
    csv('1.0.0.0,1.0.0.255,13335,"Cloudflare, Inc."\n2.0.0.0,2.0.0.9,201907,"LLC ""SPUTNIK"""\n3.0.0.0,3.0.0.0,8,Telefónica\n'),
    csv('2001::,2001::ffff,6939,Hurricane Electric LLC\n2a01:4f8::,2a01:4f9:ffff:ffff:ffff:ffff:ffff:ffff,24940,Hetzner Online GmbH\n'),
  );

  it('reads quoted organisations (RFC 4180) and UTF-8', () => {
    expect([table.organisation(13335), table.organisation(201907), table.organisation(8)]).toEqual(['Cloudflare, Inc.', 'LLC "SPUTNIK"', 'Telefónica']);
    expect(table.organisation(64512)).toBeNull();
  });

  it.each([
    ['0.255.255.255', null],
    ['1.0.0.0', 13335],
    ['1.0.0.255', 13335],
    ['1.0.1.0', null],
    ['3.0.0.0', 8],
    ['3.0.0.1', null],
    ['255.255.255.255', null],
  ])('IPv4 %s -> %s', (address, asn) => {
    expect(table.findIPv4(ipv4(address))).toBe(asn);
  });

  it.each([
    ['2001::', ipv6(0x20010000, 0, 0, 0), 6939],
    ['2001::ffff', ipv6(0x20010000, 0, 0, 0xffff), 6939],
    ['2001::1:0', ipv6(0x20010000, 0, 0, 0x10000), null],
    ['2a01:4f9:ffff:ffff:ffff:ffff:ffff:ffff', ipv6(0x2a0104f9, 0xffffffff, 0xffffffff, 0xffffffff), 24940],
    ['2a01:4fa::', ipv6(0x2a0104fa, 0, 0, 0), null],
    ['::1', ipv6(0, 0, 0, 1), null],
  ])('IPv6 %s -> %s', (_address, words, asn) => {
    expect(table.findIPv6(words)).toBe(asn);
  });

  it.each([
    ['a line cut short', '1.0.0.0,1.0.0.255\n', '', 'ASN data: line 1 has too few fields'],
    ['an IPv6 line cut short', '', '2001::,2001::ff', 'ASN data: line 1 has too few fields'],
    ['ranges out of order', '2.0.0.0,2.0.0.1,5,B\n1.0.0.0,1.0.0.1,6,A\n', '', 'ASN data: line 2 starts before line 1'],
  ])('%s stops loading instead of answering wrongly', (_case, v4, v6, message) => {
    expect(() => AsnTable.fromCsv(csv(v4), csv(v6))).toThrow(message);
  });
});
