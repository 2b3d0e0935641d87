import { z } from 'zod';
import type { Deps } from '../../deps.js';
import { actorColumn, recordEvents, type Actor } from '../../events/event-log.js';
import { isCountryCode } from '../../geo/countries.js';
import { listDevicePolicyRules, setDevicePolicyRule } from '../../repositories/device-policy.js';
import { CLIENT_ID_SYNTAX } from '../client-auth.js';
import { SUPPORTED_SCOPES } from '../scopes.js';
import { ruleFromRow } from './policies.js';
import { PROXIMITY_RULES, RULE_MODES, RULE_NAMES, type PolicyRule, type RuleName } from './policy.js';

/** The highest AS number (RFC 6793: four octets). */
const MAX_ASN = 4_294_967_295;
/** More than any operator types; a list beyond it is a mistake or an attack on the admin API. */
const MAX_LIST = 1_000;

const country = z.string().max(2).refine(isCountryCode, 'not an ISO 3166-1 alpha-2 country code (two capital letters, such as DE)');
const countries = z.array(country).min(1).max(MAX_LIST);

/**
 * One rule as the operator sets it. Only the values of the rule named may be given, and those it
 * needs must be: a rule is stored whole or not at all, so one bad item refuses the whole list.
 */
export const policyRuleInput = z
  .strictObject({
    rule: z.enum(RULE_NAMES as [RuleName, ...RuleName[]]),
    mode: z.enum(RULE_MODES),
    client_id: z.string().regex(CLIENT_ID_SYNTAX, 'not a client id').optional().describe('the app; absent: the rule is global (every app)'),
    scopes: z.array(z.enum(SUPPORTED_SCOPES)).min(1).max(SUPPORTED_SCOPES.length).optional().describe('device-scopes: the scopes a device grant may carry'),
    countries_allow: countries.optional().describe('device-countries: only device requests from these countries (ISO 3166-1 alpha-2)'),
    countries_block: countries.optional().describe('device-countries: no device request from these countries'),
    asns_block: z.array(z.number().int().min(0).max(MAX_ASN)).min(1).max(MAX_LIST).optional().describe('device-asns: no device request from these networks'),
    action: z.enum(['allow', 'warn', 'confirm', 'deny']).optional().describe('proximity-*: the action replacing PROXIMITY_POLICY_* for this signal'),
  })
  .superRefine((input, context) => {
    const given = (['scopes', 'countries_allow', 'countries_block', 'asns_block', 'action'] as const).filter((key) => input[key] !== undefined);
    const needs: readonly (readonly (typeof given)[number][])[] =
      input.rule === 'device-scopes'
        ? [['scopes']]
        : input.rule === 'device-countries'
          ? [['countries_allow'], ['countries_block']]
          : input.rule === 'device-asns'
            ? [['asns_block']]
            : input.rule in PROXIMITY_RULES
              ? [['action']]
              : [[]];
    const allowed = new Set(needs.flat());
    for (const key of given.filter((k) => !allowed.has(k))) context.addIssue({ code: 'custom', path: [key], message: `not a value of ${input.rule}` });
    // Switched off, a rule needs no values; in force it needs them (one list for device-countries).
    if (input.mode === 'off' || given.some((k) => !allowed.has(k))) return;
    if (!needs.some((set) => set.length === given.length && set.every((k) => given.includes(k)))) {
      context.addIssue({ code: 'custom', path: [], message: `${input.rule} needs ${needs.map((set) => set.join(' + ') || 'no values').join(', or ')}` });
    }
  });

export type PolicyRuleInput = z.output<typeof policyRuleInput>;

/** A rule as the admin API shows it. */
export interface PolicyRuleView {
  rule: RuleName;
  client_id: string | null;
  mode: PolicyRule['mode'];
  scopes: string[] | null;
  countries_allow: string[] | null;
  countries_block: string[] | null;
  asns_block: number[] | null;
  action: string | null;
  set_at: string;
  refused: number;
  would_have_refused: number;
}

function toRuleView(rule: PolicyRule): PolicyRuleView {
  return {
    rule: rule.rule,
    client_id: rule.clientId,
    mode: rule.mode,
    scopes: rule.scopes === null ? null : [...rule.scopes],
    countries_allow: rule.countryList === 'allow' ? [...(rule.countries ?? [])] : null,
    countries_block: rule.countryList === 'block' ? [...(rule.countries ?? [])] : null,
    asns_block: rule.asns === null ? null : [...rule.asns],
    action: rule.proximityAction,
    set_at: rule.setAt.toISOString(),
    refused: rule.refused,
    would_have_refused: rule.wouldHaveRefused,
  };
}

export type SetOutcome = { kind: 'set'; rule: PolicyRuleView } | { kind: 'no_client' };

/**
 * Stores the rule, then reads the rules again on this instance before answering: once the caller
 * hears the answer, every request this instance receives is judged by it. The others read it when
 * the change is announced (policies.ts).
 */
export async function setPolicyRule(
  deps: Pick<Deps, 'db' | 'clock' | 'devicePolicies'>,
  input: PolicyRuleInput,
  actor: Actor | null = null,
): Promise<SetOutcome> {
  const countryList = input.countries_allow ? 'allow' : input.countries_block ? 'block' : null;
  const now = deps.clock.now();
  try {
    // The rule and its device_policy.changed event (the rule as set: no secret in it) commit together.
    await deps.db.transaction().execute(async (trx) => {
      await setDevicePolicyRule(trx, {
        client_id: input.client_id ?? null,
        rule: input.rule,
        mode: input.mode,
        scopes: input.scopes ? [...new Set(input.scopes)] : null,
        country_list: countryList,
        countries: countryList === null ? null : [...new Set(input.countries_allow ?? input.countries_block)],
        asns: input.asns_block ? [...new Set(input.asns_block)] : null,
        proximity_action: input.action ?? null,
        set_at: now,
      });
      await recordEvents(trx, [
        { type: 'device_policy.changed', client_id: input.client_id ?? null, created_at: now, actor: actorColumn(actor), data: JSON.stringify(input) },
      ]);
    });
  } catch (error) {
    // The app's row is the foreign key: an unknown app stores nothing.
    if (error instanceof Error && 'code' in error && error.code === '23503') return { kind: 'no_client' };
    throw error;
  }
  await deps.devicePolicies.load();
  const stored = deps.devicePolicies.rules.find((r) => r.rule === input.rule && r.clientId === (input.client_id ?? null));
  if (!stored) throw new Error('a rule just set was not read back');
  return { kind: 'set', rule: toRuleView(stored) };
}

/** Every rule as stored (an app's and the global ones with `clientId`), with its counts so far. */
export async function listPolicyRules(deps: Pick<Deps, 'db' | 'devicePolicies'>, clientId?: string): Promise<PolicyRuleView[]> {
  // This instance's counts not yet written are added first; other instances' within a second.
  await deps.devicePolicies.flush();
  const rows = await listDevicePolicyRules(deps.db);
  return rows.filter((row) => clientId === undefined || row.client_id === null || row.client_id === clientId).map((row) => toRuleView(ruleFromRow(row)));
}
