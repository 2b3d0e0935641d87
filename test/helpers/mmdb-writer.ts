/**
 * A minimal writer of MaxMind DB files (format 2.0, https://maxmind.github.io/MaxMind-DB/), so
 * that tests can build a City database of their own, with invented data: MaxMind's databases may
 * not be shipped here, and npm has no writer. Enough for a handful of networks: an IPv6 tree with
 * 24-bit records, IPv4 networks under ::/96 as in MaxMind's own files, no pointers in the data.
 */

export type MmdbValue = string | number | boolean | MmdbValue[] | { [key: string]: MmdbValue };

export interface MmdbNetwork {
  /** "192.0.2.0/24" or "2001:db8::/32". */
  network: string;
  data: { [key: string]: MmdbValue };
}

const METADATA_MARKER = Buffer.from('abcdef4d61784d696e642e636f6d', 'hex'); // "\xAB\xCD\xEFMaxMind.com"
const RECORD_BITS = 24;

type TreeRecord = { node: number } | { data: number } | null;

export function writeMmdb(options: { databaseType: string; networks: MmdbNetwork[]; buildEpoch?: number }): Buffer {
  const data: Buffer[] = [];
  let dataSize = 0;
  const nodes: [TreeRecord, TreeRecord][] = [[null, null]];
  for (const { network, data: value } of options.networks) {
    const encoded = encode(value);
    const offset = dataSize;
    data.push(encoded);
    dataSize += encoded.length;
    const bits = networkBits(network);
    let node = 0;
    for (let depth = 0; depth < bits.length - 1; depth++) {
      const side = bits[depth]!;
      let next = nodes[node]![side];
      if (next === null) {
        nodes.push([null, null]);
        next = { node: nodes.length - 1 };
        nodes[node]![side] = next;
      }
      if (!('node' in next)) throw new Error(`${network} lies inside another network`);
      node = next.node;
    }
    nodes[node]![bits[bits.length - 1]!] = { data: offset };
  }
  const nodeCount = nodes.length;
  const recordValue = (record: TreeRecord) => (record === null ? nodeCount : 'node' in record ? record.node : nodeCount + 16 + record.data);
  const tree = Buffer.alloc((nodeCount * RECORD_BITS * 2) / 8);
  nodes.forEach(([left, right], index) => {
    tree.writeUIntBE(recordValue(left), index * 6, 3);
    tree.writeUIntBE(recordValue(right), index * 6 + 3, 3);
  });
  const metadata = encode({
    node_count: nodeCount,
    record_size: RECORD_BITS,
    ip_version: 6,
    database_type: options.databaseType,
    languages: ['en'],
    binary_format_major_version: 2,
    binary_format_minor_version: 0,
    build_epoch: options.buildEpoch ?? 1_700_000_000,
    description: { en: 'test fixture written by test/helpers/mmdb-writer.ts' },
  });
  return Buffer.concat([tree, Buffer.alloc(16), ...data, METADATA_MARKER, metadata]);
}

/** The network's prefix as bits, IPv4 placed under ::/96. */
function networkBits(cidr: string): (0 | 1)[] {
  const [address, lengthText] = cidr.split('/') as [string, string];
  const length = Number(lengthText);
  const bytes: number[] = [];
  let offset = 0;
  if (address.includes(':')) {
    const [head, tail = ''] = address.split('::') as [string, string?];
    const headGroups = head ? head.split(':') : [];
    const tailGroups = tail ? tail.split(':') : [];
    const groups = [...headGroups, ...Array(8 - headGroups.length - tailGroups.length).fill('0'), ...tailGroups];
    for (const group of groups) bytes.push(parseInt(group, 16) >> 8, parseInt(group, 16) & 255);
  } else {
    bytes.push(...Array(12).fill(0), ...address.split('.').map(Number));
    offset = 96;
  }
  const bits: (0 | 1)[] = [];
  for (let i = 0; i < offset + length; i++) bits.push(((bytes[i >> 3]! >> (7 - (i & 7))) & 1) as 0 | 1);
  return bits;
}

function control(type: number, size: number): Buffer {
  const extended = type > 7;
  const first = (extended ? 0 : type << 5) | Math.min(size, 29);
  const head = extended ? [first, type - 7] : [first];
  if (size < 29) return Buffer.from(head);
  if (size < 29 + 256) return Buffer.from([...head, size - 29]);
  throw new Error('values this long are not needed by the tests');
}

function unsigned(value: number): Buffer {
  const bytes: number[] = [];
  for (let v = value; v > 0; v = Math.floor(v / 256)) bytes.unshift(v % 256);
  return Buffer.from(bytes);
}

function encode(value: MmdbValue): Buffer {
  if (typeof value === 'string') {
    const text = Buffer.from(value, 'utf8');
    return Buffer.concat([control(2, text.length), text]);
  }
  if (typeof value === 'boolean') return control(14, value ? 1 : 0);
  if (typeof value === 'number') {
    if (!Number.isInteger(value) || value < 0) throw new Error('only unsigned integers are needed by the tests');
    const bytes = unsigned(value);
    // uint32 (type 6) up to 2^32 - 1, then uint64 (type 9).
    return Buffer.concat([control(value <= 0xffffffff ? 6 : 9, bytes.length), bytes]);
  }
  if (Array.isArray(value)) return Buffer.concat([control(11, value.length), ...value.map(encode)]);
  const entries = Object.entries(value);
  return Buffer.concat([control(7, entries.length), ...entries.flatMap(([key, item]) => [encode(key), encode(item)])]);
}
