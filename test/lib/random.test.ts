import { describe, expect, it } from 'vitest';
import { randomToken } from '../../src/lib/random.js';

describe('randomToken: random bytes drawn from the system in 4 KiB blocks', () => {
  it('never hands out the same bytes twice, across block boundaries and for sizes that do not divide a block', () => {
    // 32-byte tokens: 128 to a block; 300 of them span three blocks. 12-byte and 100-byte ones leave remainders.
    const tokens = [
      ...Array.from({ length: 300 }, () => randomToken(32)),
      ...Array.from({ length: 100 }, () => randomToken(12)),
      ...Array.from({ length: 100 }, () => randomToken(100)),
    ];
    expect(new Set(tokens).size).toBe(tokens.length);
    const bytes = tokens.map((token) => Buffer.from(token, 'base64url'));
    expect(bytes.slice(0, 300).every((b) => b.length === 32)).toBe(true);
    expect(bytes.slice(300, 400).every((b) => b.length === 12)).toBe(true);
    expect(bytes.slice(400).every((b) => b.length === 100)).toBe(true);
    // No 8-byte run is handed out twice (a reused block would repeat every run of it).
    const runs = new Set<string>();
    let total = 0;
    for (const b of bytes) {
      for (let i = 0; i + 8 <= b.length; i += 8) {
        runs.add(b.subarray(i, i + 8).toString('hex'));
        total++;
      }
    }
    expect(runs.size).toBe(total);
  });

  it('serves a request larger than a block directly', () => {
    const token = randomToken(5000);
    expect(Buffer.from(token, 'base64url')).toHaveLength(5000);
  });
});
