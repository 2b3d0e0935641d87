import { parseIPv6Bytes } from './ip-address.js';

const NEWLINE = 0x0a;
const COMMA = 0x2c;
const DOT = 0x2e;
const QUOTE = 0x22;

/**
 * Which autonomous system announces an address, from the CSV files of ip-location-db's `asn`
 * package: `first,last,asn,organisation` per line, sorted by first address, one range per line.
 * Held as typed arrays searched by bisection: about 9 MB for the half million ranges, and no
 * object per range for the garbage collector to walk.
 */
export class AsnTable {
  private constructor(
    private readonly v4First: Uint32Array,
    private readonly v4Last: Uint32Array,
    private readonly v4Asn: Uint32Array,
    /** Four words per range, most significant first. */
    private readonly v6First: Uint32Array,
    private readonly v6Last: Uint32Array,
    private readonly v6Asn: Uint32Array,
    private readonly organisations: ReadonlyMap<number, string>,
  ) {}

  static fromCsv(ipv4Csv: Buffer, ipv6Csv: Buffer): AsnTable {
    const organisations = new Map<number, string>();
    const v4 = readRanges(ipv4Csv, 1, readIPv4Field, organisations);
    const v6 = readRanges(ipv6Csv, 4, readIPv6Field, organisations);
    return new AsnTable(v4.first, v4.last, v4.asn, v6.first, v6.last, v6.asn, organisations);
  }

  /** The AS announcing an IPv4 address (as an unsigned 32-bit value), or null. */
  findIPv4(value: number): number | null {
    const first = this.v4First;
    let low = 0;
    let high = first.length - 1;
    let found = -1;
    while (low <= high) {
      const middle = (low + high) >>> 1;
      if (first[middle]! <= value) {
        found = middle;
        low = middle + 1;
      } else high = middle - 1;
    }
    return found !== -1 && value <= this.v4Last[found]! ? this.v4Asn[found]! : null;
  }

  /** The AS announcing an IPv6 address (four 32-bit words), or null. */
  findIPv6(words: Uint32Array): number | null {
    const count = this.v6Asn.length;
    let low = 0;
    let high = count - 1;
    let found = -1;
    while (low <= high) {
      const middle = (low + high) >>> 1;
      if (compareWords(this.v6First, middle * 4, words) <= 0) {
        found = middle;
        low = middle + 1;
      } else high = middle - 1;
    }
    return found !== -1 && compareWords(this.v6Last, found * 4, words) >= 0 ? this.v6Asn[found]! : null;
  }

  /** The organisation the data names for an AS number, or null. */
  organisation(asn: number): string | null {
    return this.organisations.get(asn) ?? null;
  }
}

/** Sign of table[at..at+3] - words. */
function compareWords(table: Uint32Array, at: number, words: Uint32Array): number {
  for (let k = 0; k < 4; k++) {
    const a = table[at + k]!;
    const b = words[k]!;
    if (a !== b) return a < b ? -1 : 1;
  }
  return 0;
}

function compareRanges(table: Uint32Array, a: number, b: number, words: number): number {
  for (let k = 0; k < words; k++) {
    if (table[a + k] !== table[b + k]) return table[a + k]! < table[b + k]! ? -1 : 1;
  }
  return 0;
}

function countLines(csv: Buffer): number {
  let lines = 0;
  for (let i = csv.indexOf(NEWLINE); i !== -1; i = csv.indexOf(NEWLINE, i + 1)) lines++;
  return csv.length > 0 && csv[csv.length - 1] !== NEWLINE ? lines + 1 : lines;
}

/**
 * The organisation of each AS number, taken from its first line (the data names an AS the same
 * way on every line). Only those fields become strings, decoded together at the end.
 */
class OrganisationNames {
  private readonly asns: number[] = [];
  private readonly spans: number[] = [];
  private readonly seen = new Set<number>();

  constructor(private readonly names: Map<number, string>) {}

  offer(asn: number, from: number, to: number): void {
    if (this.seen.has(asn) || this.names.has(asn)) return;
    this.seen.add(asn);
    this.asns.push(asn);
    this.spans.push(from, to);
  }

  /** CSV fields (RFC 4180 quoting: "..." with "" for a quote) decoded in one go. */
  decode(csv: Buffer): void {
    let size = 0;
    for (let k = 0; k < this.spans.length; k += 2) size += this.spans[k + 1]! - this.spans[k]! + 1;
    const joined = Buffer.allocUnsafe(size);
    let at = 0;
    for (let k = 0; k < this.spans.length; k += 2) {
      at += csv.copy(joined, at, this.spans[k]!, this.spans[k + 1]!);
      joined[at++] = NEWLINE;
    }
    const fields = joined.toString('utf8', 0, Math.max(0, at - 1)).split('\n');
    this.asns.forEach((asn, k) => {
      const field = fields[k]!;
      this.names.set(asn, field.charCodeAt(0) === QUOTE ? field.slice(1, -1).replaceAll('""', '"') : field);
    });
  }
}

/** Reads one address field and its comma into out (at row × the words of an address); returns where the next field starts. */
type FieldReader = (csv: Buffer, from: number, row: number, out: Uint32Array) => number;

/** One pass over the bytes, without a string per line. */
function readRanges(csv: Buffer, wordsPerAddress: 1 | 4, readField: FieldReader, organisations: Map<number, string>) {
  const lines = countLines(csv);
  const first = new Uint32Array(lines * wordsPerAddress);
  const last = new Uint32Array(lines * wordsPerAddress);
  const asn = new Uint32Array(lines);
  const names = new OrganisationNames(organisations);
  let row = 0;
  let i = 0;
  while (i < csv.length && row < lines) {
    i = readField(csv, i, row, first);
    i = readField(csv, i, row, last);
    i = readRestOfLine(csv, i, row, asn, names);
    row++;
  }
  if (row !== lines) throw new Error(`ASN data: counted ${lines} lines, read ${row}`);
  // Bisection finds the wrong range, silently, in unsorted data.
  for (let r = 1; r < row; r++) {
    if (compareRanges(first, (r - 1) * wordsPerAddress, r * wordsPerAddress, wordsPerAddress) > 0) {
      throw new Error(`ASN data: line ${r + 1} starts before line ${r}`);
    }
  }
  names.decode(csv);
  return { first, last, asn };
}

const readIPv4Field: FieldReader = (csv, from, row, out) => {
  let i = from;
  let value = 0;
  let octet = 0;
  let c: number | undefined;
  // biome-ignore lint/suspicious/noAssignInExpressions: the loader's inner loop, one read per byte, kept as it was measured.
  while ((c = csv[i++]) !== COMMA) {
    if (c === undefined) throw tooFewFields(row);
    if (c === DOT) {
      value = value * 256 + octet;
      octet = 0;
    } else octet = octet * 10 + (c - 0x30);
  }
  out[row] = value * 256 + octet;
  return i;
};

const readIPv6Field: FieldReader = (csv, from, row, out) => {
  let comma = from;
  while (comma < csv.length && csv[comma] !== COMMA) comma++;
  if (comma >= csv.length) throw tooFewFields(row);
  parseIPv6Bytes(csv, from, comma, out, row * 4);
  return comma + 1;
};

function tooFewFields(row: number): Error {
  return new Error(`ASN data: line ${row + 1} has too few fields`);
}

/** `asn,organisation\n`: records both; returns where the next line starts. */
function readRestOfLine(csv: Buffer, from: number, row: number, asn: Uint32Array, names: OrganisationNames): number {
  const end = csv.length;
  let i = from;
  let number = 0;
  for (; i < end && csv[i] !== COMMA; i++) number = number * 10 + (csv[i]! - 0x30);
  const nameStart = i + 1;
  while (i < end && csv[i] !== NEWLINE) i++;
  names.offer(number, nameStart, i);
  asn[row] = number;
  return i + 1;
}
