import { z } from 'zod';
import type { Deps } from '../../deps.js';
import { CLIENT_ID_SYNTAX } from '../../oauth/client-auth.js';
import { assess } from '../../oauth/device/assessment.js';
import { RULE_MODES, RULE_NAMES } from '../../oauth/device/policy.js';
import { listPolicyRules, policyRuleInput, setPolicyRule } from '../../oauth/device/policy-settings.js';
import { untrustedForwardingDetail } from '../plugins/untrusted-forwarding.js';
import { notFound } from './problem.js';
import { problems } from './schemas.js';
import { adminActor, type AdminApp } from './types.js';

const tags = ['device policy'];

const ruleView = z.object({
  rule: z.enum(RULE_NAMES as [string, ...string[]]),
  client_id: z.string().nullable().describe('null: a global rule (every app)'),
  mode: z.enum(RULE_MODES),
  scopes: z.array(z.string()).nullable(),
  countries_allow: z.array(z.string()).nullable(),
  countries_block: z.array(z.string()).nullable(),
  asns_block: z.array(z.number()).nullable(),
  action: z.string().nullable(),
  set_at: z.string().describe('when the rule was last set: its counts start there'),
  refused: z.number().describe('requests it refused since it was set (enforce)'),
  would_have_refused: z.number().describe('requests it would have refused since it was set (report-only)'),
});

const reportLine = ruleView.pick({ rule: true, client_id: true, mode: true, set_at: true, refused: true, would_have_refused: true });

const mitigation = z.object({
  id: z.string(),
  mitigation: z.string(),
  state: z.enum(['in_place', 'partial', 'report_only', 'off', 'attention']),
  settings: z.array(z.string()),
  detail: z.string(),
});

const clientQuery = z.object({ client_id: z.string().regex(CLIENT_ID_SYNTAX, 'not a client id').optional().describe("this app's rules and the global ones") });

export function adminDevicePolicyRoutes(app: AdminApp, deps: Deps): void {
  app.post(
    '/admin/device-policy/rules',
    {
      schema: {
        tags,
        summary:
          'Set one device-flow rule, for one app (client_id) or every app, in mode off, report-only or enforce; this instance applies it before answering, every other within 5 s',
        body: policyRuleInput,
        response: { 200: ruleView, ...problems },
      },
    },
    async (request) => {
      const outcome = await setPolicyRule(deps, request.body, adminActor(request));
      if (outcome.kind === 'no_client') throw notFound(`no client ${request.body.client_id}: see GET /admin/clients`);
      const { rule, client_id, mode } = outcome.rule;
      request.audit = { action: 'device-policy.set', target: `${rule} ${client_id ?? 'global'}`, details: { mode } };
      return outcome.rule;
    },
  );

  app.get(
    '/admin/device-policy/rules',
    {
      schema: {
        tags,
        summary: 'The device-flow rules: every one, or those applying to one app (its own and the global ones)',
        querystring: clientQuery,
        response: { 200: z.object({ items: z.array(ruleView) }), ...problems },
      },
    },
    async (request) => ({ items: await listPolicyRules(deps, request.query.client_id) }),
  );

  app.get(
    '/admin/device-policy/report',
    {
      schema: {
        tags,
        summary: 'Per rule, how many requests it refused (enforce) or would have refused (report-only) since it was set',
        querystring: clientQuery,
        response: { 200: z.object({ items: z.array(reportLine) }), ...problems },
      },
    },
    async (request) => ({
      items: (await listPolicyRules(deps, request.query.client_id)).map(({ rule, client_id, mode, set_at, refused, would_have_refused }) => ({
        rule,
        client_id,
        mode,
        set_at,
        refused,
        would_have_refused,
      })),
    }),
  );

  app.get(
    '/admin/assessment',
    {
      schema: {
        tags,
        summary: 'RFC 10027 self-assessment: each cross-device mitigation with its state in the running configuration and device policy',
        response: { 200: z.object({ mitigations: z.array(mitigation) }), ...problems },
      },
    },
    async () => {
      // The counts of report-only rules as of now, this instance's included.
      await deps.devicePolicies.flush();
      await deps.devicePolicies.load();
      return {
        mitigations: await assess({ config: deps.config, db: deps.db, rules: deps.devicePolicies.rules, untrustedForwarding: untrustedForwardingDetail(deps) }),
      };
    },
  );
}
