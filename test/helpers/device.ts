import { expect } from 'vitest';
import type { DeviceAuthorizationResponse } from '../../src/oauth/device/authorization.js';
import { findDeviceRequestByUserCode } from '../../src/repositories/device-requests.js';
import { userCodeHmac } from '../../src/oauth/device/user-code.js';
import { approveWithPhrase, denyRequest } from '../../src/oauth/device/verification.js';
import { FORM, form, type TestApp } from './app.js';

export const DEVICE_GRANT = 'urn:ietf:params:oauth:grant-type:device_code';

export async function requestDeviceCode(t: TestApp, fields: Record<string, string | string[] | undefined>, headers: Record<string, string> = {}) {
  return t.app.inject({ method: 'POST', url: '/oauth/device/code', headers: { ...FORM, ...headers }, payload: form(fields) });
}

export async function startDeviceFlow(t: TestApp, clientId: string, extra: Record<string, string> = {}, headers: Record<string, string> = {}) {
  const res = await requestDeviceCode(t, { client_id: clientId, ...extra }, headers);
  expect(res.statusCode, res.body).toBe(200);
  return res.json() as DeviceAuthorizationResponse;
}

export async function poll(t: TestApp, clientId: string | undefined, deviceCode: string, headers: Record<string, string> = {}) {
  return t.app.inject({
    method: 'POST',
    url: '/oauth/token',
    headers: { ...FORM, ...headers },
    payload: form({ grant_type: DEVICE_GRANT, device_code: deviceCode, client_id: clientId }),
  });
}

/** The decision as the verification page makes it, without the browser round trips. */
export async function decide(t: TestApp, userCode: string, userId: string, choice: 'approve' | 'deny' | 'wrong_phrase') {
  const row = await findDeviceRequestByUserCode(t.deps.db, userCodeHmac(t.deps.secrets.userCodeKey, userCode));
  if (!row) throw new Error('no such request');
  if (choice === 'deny') return denyRequest(t.deps, row.request_id, userId);
  // A request whose device shows no phrase is approved with none picked.
  const picked = choice === 'approve' ? row.phrase : row.phrase_choices!.find((p) => p !== row.phrase)!;
  return approveWithPhrase(t.deps, row.request_id, { userId, authTime: t.clock.now() }, picked);
}
