import type { FastifyInstance } from 'fastify';
import { expect } from 'vitest';
import { buildAdminApp } from '../../src/admin-app.js';
import type { TestApp } from './app.js';
import { FORM, form } from './app.js';
import { DEVICE_GRANT } from './device.js';

/**
 * Issue 31 §2: the device policy as an operator sets it, through the admin API of one instance
 * (in process, over inject: the same routes the CLI and the admin listeners serve).
 */
export interface PolicyAdmin {
  app: FastifyInstance;
  set(body: Record<string, unknown>): Promise<{ status: number; body: any }>;
  /** Sets a rule and expects it stored. */
  rule(rule: string, mode: string, values?: Record<string, unknown>): Promise<any>;
  report(clientId?: string): Promise<ReportLine[]>;
  /** The report line of one rule (global when `clientId` is null). */
  counts(rule: string, clientId: string | null): Promise<ReportLine>;
  close(): Promise<void>;
}

export interface ReportLine {
  rule: string;
  client_id: string | null;
  mode: string;
  set_at: string;
  refused: number;
  would_have_refused: number;
}

export async function policyAdmin(t: Pick<TestApp, 'deps'>): Promise<PolicyAdmin> {
  const app = await buildAdminApp(t.deps as TestApp['deps'], { listener: 'socket', logger: false });
  // With ADMIN_TOKEN set, every listener asks for it.
  const token = t.deps.config.admin.token;
  const headers = token ? { authorization: `Bearer ${token}` } : {};
  const set = async (body: Record<string, unknown>) => {
    const res = await app.inject({ method: 'POST', url: '/admin/device-policy/rules', headers, payload: body });
    return { status: res.statusCode, body: res.json() };
  };
  const report = async (clientId?: string) => {
    const res = await app.inject({
      method: 'GET',
      url: `/admin/device-policy/report${clientId ? `?client_id=${encodeURIComponent(clientId)}` : ''}`,
      headers,
    });
    expect(res.statusCode, res.body).toBe(200);
    return (res.json() as { items: ReportLine[] }).items;
  };
  return {
    app,
    set,
    async rule(rule, mode, values = {}) {
      const answer = await set({ rule, mode, ...values });
      expect(answer.status, JSON.stringify(answer.body)).toBe(200);
      return answer.body;
    },
    report,
    async counts(rule, clientId) {
      const line = (await report()).find((l) => l.rule === rule && l.client_id === clientId);
      if (!line) throw new Error(`no rule ${rule} for ${clientId ?? 'every app'}`);
      return line;
    },
    close: () => app.close(),
  };
}

/** The address a request claims behind the loopback proxy TRUST_PROXY names. */
export const from = (address: string) => ({ 'x-forwarded-for': address });

export function deviceCodeFrom(t: Pick<TestApp, 'app'>, clientId: string, address: string, fields: Record<string, string> = {}) {
  return t.app.inject({ method: 'POST', url: '/oauth/device/code', headers: { ...FORM, ...from(address) }, payload: form({ client_id: clientId, ...fields }) });
}

export function pollFrom(t: Pick<TestApp, 'app'>, clientId: string, deviceCode: string, address: string) {
  return t.app.inject({
    method: 'POST',
    url: '/oauth/token',
    headers: { ...FORM, ...from(address) },
    payload: form({ grant_type: DEVICE_GRANT, device_code: deviceCode, client_id: clientId }),
  });
}

/** The value of the refusals metric for one rule, level and outcome (0 when never counted). */
export async function refusalsMetric(
  t: Pick<TestApp, 'deps'>,
  labels: { rule: string; level: 'global' | 'app'; outcome: 'refused' | 'would_have_refused' },
): Promise<number> {
  const metric = await t.deps.metrics.devicePolicyRefusals.get();
  return metric.values.find((v) => v.labels.rule === labels.rule && v.labels.level === labels.level && v.labels.outcome === labels.outcome)?.value ?? 0;
}

/**
 * Addresses as the shipped location data places them (test/oauth/proximity-attacks.test.ts):
 * 3.34.0.x EC2 in Korea (AS16509, a hosting network), 79.192.0.x a Deutsche Telekom home line in
 * Germany (AS3320), 73.0.0.x Comcast in the US (AS7922).
 */
export const EC2_KOREA = '3.34.0.1';
export const HOME_DE = '79.192.0.1';
export const HOME_US = '73.0.0.1';
