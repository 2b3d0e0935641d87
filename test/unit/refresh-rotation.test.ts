import { describe, expect, it } from 'vitest';
import { couldBeOurRefreshToken, judgeUnrotated, UNKNOWN } from '../../src/oauth/grant-types/refresh-token.rules.js';
import type { RotationOutcome } from '../../src/repositories/refresh-tokens.js';

type Found = Pick<RotationOutcome, 'client_disabled' | 'key_ok' | 'live' | 'replaced' | 'expired' | 'scope_ok' | 'scopes'>;

/** A current, live, unexpired token of an enabled app, in scope and with its key: what a rotation needs. */
const ROTATABLE: Found = { client_disabled: false, key_ok: true, live: true, replaced: false, expired: false, scope_ok: true, scopes: ['openid', 'profile'] };

describe("the refresh rotation's row, read when it did not rotate (RFC 6749 §6, RFC 9700 §4.14.2, RFC 9449 §5)", () => {
  it.each([
    ['the app disabled', { client_disabled: true }, 'invalid_client', false],
    ['the app disabled and the key not proven: the app first', { client_disabled: true, key_ok: false }, 'invalid_client', false],
    ['a bound grant without its key', { key_ok: false }, 'invalid_dpop_proof', false],
    ['without its key, even replaced: never revokes', { key_ok: false, replaced: true }, 'invalid_dpop_proof', false],
    ['the grant revoked, user banned or app off', { live: false }, 'invalid_grant', true],
    ['not live and replaced: no retry for a dead grant', { live: false, replaced: true }, 'invalid_grant', true],
    ['replaced: a retry or reuse', { replaced: true }, 'retry or revoke', true],
    ['replaced and expired: still a retry or reuse', { replaced: true, expired: true }, 'retry or revoke', true],
    ['expired', { expired: true }, 'invalid_grant', true],
    ['expired and out of scope: expiry first', { expired: true, scope_ok: false }, 'invalid_grant', true],
    ['out of scope', { scope_ok: false }, 'invalid_scope', true],
    ['current, live and in scope, yet not rotated: a concurrent refresh won', {}, 'retry or revoke', true],
  ] as const)('%s -> %s (proof spent: %s)', (_case, found, answer, spent) => {
    const verdict = judgeUnrotated({ ...ROTATABLE, ...found }, ['openid']);
    expect(verdict.refusal?.error ?? 'retry or revoke').toBe(answer);
    expect(verdict.spendProof).toBe(spent);
  });

  it('a grant no longer live is not told apart from an unknown token', () => {
    expect(judgeUnrotated({ ...ROTATABLE, live: false }, null).refusal?.description).toBe(UNKNOWN);
  });

  it('an expired token is told to sign in again', () => {
    expect(judgeUnrotated({ ...ROTATABLE, expired: true }, null).refusal?.description).toBe('the refresh token has expired; sign in again');
  });

  it('invalid_scope names the scopes beyond the grant', () => {
    const refusal = judgeUnrotated({ ...ROTATABLE, scope_ok: false }, ['openid', 'email', 'offline_access']).refusal;
    expect(refusal?.toBody()).toEqual({ error: 'invalid_scope', error_description: 'scope exceeds what was granted: email offline_access' });
  });

  it('a disabled app hears invalid_client with a Basic challenge (401)', () => {
    const refusal = judgeUnrotated({ ...ROTATABLE, client_disabled: true }, null).refusal;
    expect(refusal?.status).toBe(401);
    expect(refusal?.description).toBe('this app is disabled');
  });
});

describe('what is looked up at all', () => {
  it.each([
    [`da_rt_${'a'.repeat(43)}`, true],
    [`da_rt_${'a'.repeat(250)}`, true],
    [`da_rt_${'a'.repeat(251)}`, false],
    [`da_at_${'a'.repeat(43)}`, false],
    ['', false],
  ])('%s could be ours: %s', (value, ours) => {
    expect(couldBeOurRefreshToken(value)).toBe(ours);
  });
});
