import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { HostResolver } from '../../src/lib/outbound-address.js';
import { postOutbound, receiverUrlProblem } from '../../src/lib/outbound-post.js';
import { isLoopbackAddress } from '../../src/lib/public-address.js';
import { type Receiver, startReceiver } from '../helpers/receiver.js';

/** Names the test makes up, resolved here and never through DNS. */
const names: Record<string, string[]> = {
  'loopback.test': ['127.0.0.1'],
  'private.test': ['10.0.0.7'],
  'metadata.test': ['169.254.169.254'],
  'split.test': ['127.0.0.1', '192.168.1.1'],
};
const resolve: HostResolver = async (hostname) => {
  const found = names[hostname] ?? (/^[\d.]+$/.test(hostname) ? [hostname] : hostname.includes(':') ? [hostname] : undefined);
  if (!found) throw Object.assign(new Error('ENOTFOUND'), { code: 'ENOTFOUND' });
  return found.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
};

let receiver: Receiver;
beforeAll(async () => {
  receiver = await startReceiver();
});
afterAll(() => receiver.close());

const options = (allowLoopback: boolean) => ({ resolve, allowLoopback, userAgent: 'test', timeoutMs: 2000 });

describe('receiver URLs an operator may register (lib/outbound-post.ts)', () => {
  it.each(['https://hooks.example.com/device-auth', 'https://hooks.example.com:8443/a?b=c', 'https://[2606:4700:4700::1111]/hook', 'https://8.8.8.8/hook'])(
    '%s is accepted',
    (url) => {
      expect(receiverUrlProblem(url, false)).toBeNull();
    },
  );

  it.each([
    ['http://hooks.example.com/', 'must be https'],
    ['ftp://hooks.example.com/', 'must be https'],
    ['https://user:pass@hooks.example.com/', 'must not carry credentials'],
    ['https://hooks.example.com/#x', 'must not have a fragment'],
    ['https://10.1.2.3/', 'private'],
    ['https://192.168.0.1/', 'private'],
    ['https://127.0.0.1/', 'private'],
    ['https://0x7f.1/', 'private'],
    ['https://2130706433/', 'private'],
    ['https://169.254.169.254/latest/meta-data', 'private'],
    ['https://[::1]/', 'private'],
    ['https://[::ffff:127.0.0.1]/', 'private'],
    ['https://[::ffff:10.0.0.1]/', 'private'],
    ['https://[fe80::1]/', 'private'],
    ['https://[fd00::1]/', 'private'],
    ['https://0.0.0.0/', 'private'],
    ['https://localhost/', 'loopback name'],
    ['https://api.localhost/', 'loopback name'],
    ['not a url', 'absolute URL'],
    [`https://example.com/${'a'.repeat(2000)}`, 'at most'],
  ])('%s is refused (%s)', (url, reason) => {
    expect(receiverUrlProblem(url, false)).toContain(reason);
  });

  it('EVENTS_ALLOW_LOOPBACK allows loopback, over http too, and nothing else private', () => {
    expect(receiverUrlProblem('http://127.0.0.1:8080/hook', true)).toBeNull();
    expect(receiverUrlProblem('http://[::1]:8080/hook', true)).toBeNull();
    expect(receiverUrlProblem('http://localhost:8080/hook', true)).toBeNull();
    expect(receiverUrlProblem('https://127.0.0.1/hook', true)).toBeNull();
    expect(receiverUrlProblem('http://hooks.example.com/', true)).toContain('https');
    expect(receiverUrlProblem('http://10.0.0.1/', true)).toContain('https');
    expect(receiverUrlProblem('https://10.0.0.1/', true)).toContain('private');
    expect(receiverUrlProblem('https://169.254.169.254/', true)).toContain('private');
  });

  it('knows loopback in every form', () => {
    expect(['127.0.0.1', '127.9.9.9', '::1', '::ffff:127.0.0.1'].every(isLoopbackAddress)).toBe(true);
    expect(['10.0.0.1', '::2', '8.8.8.8', 'localhost'].some(isLoopbackAddress)).toBe(false);
  });
});

describe('a POST to a receiver (lib/outbound-post.ts)', () => {
  const url = (host: string) => `http://${host}:${new URL(receiver.origin).port}/hook`;

  it('reaches a loopback receiver over http only with EVENTS_ALLOW_LOOPBACK', async () => {
    const before = receiver.received.length;
    expect(await postOutbound(url('127.0.0.1'), {}, '{}', options(false))).toEqual({ refusal: 'not_public' });
    expect(await postOutbound(url('127.0.0.1'), {}, '{}', options(true))).toEqual({ status: 200 });
    expect(receiver.received.length).toBe(before + 1);
  });

  it('checks every address a name resolves to, at each request', async () => {
    const before = receiver.received.length;
    expect(await postOutbound(url('loopback.test'), {}, '{}', options(false))).toEqual({ refusal: 'not_public' });
    expect(await postOutbound(`https://private.test/hook`, {}, '{}', options(true))).toEqual({ refusal: 'not_public' });
    expect(await postOutbound(`https://metadata.test/hook`, {}, '{}', options(true))).toEqual({ refusal: 'not_public' });
    // One private address among the answers is enough to refuse.
    expect(await postOutbound(url('split.test'), {}, '{}', options(true))).toEqual({ refusal: 'not_public' });
    expect(await postOutbound(`https://unknown.test/hook`, {}, '{}', options(true))).toEqual({ refusal: 'not_resolved' });
    expect(receiver.received.length).toBe(before);
  });

  it('never sends plain http to an address that is not loopback, even when allowed', async () => {
    expect(await postOutbound('http://8.8.8.8/hook', {}, '{}', options(true))).toEqual({ refusal: 'not_https' });
  });

  it('follows no redirect: a 3xx is an answer, and its Location is never visited', async () => {
    receiver.answer = () => 302;
    const before = receiver.received.length;
    expect(await postOutbound(url('127.0.0.1'), {}, '{}', options(true))).toEqual({ status: 302 });
    expect(receiver.received.length).toBe(before + 1);
    receiver.answer = () => 200;
  });

  it('gives up on a receiver that does not answer within its time', async () => {
    receiver.answer = () => 'hang';
    const started = Date.now();
    expect(await postOutbound(url('127.0.0.1'), {}, '{}', { ...options(true), timeoutMs: 300 })).toEqual({ refusal: 'timeout' });
    expect(Date.now() - started).toBeLessThan(2000);
    receiver.answer = () => 200;
  });
});
