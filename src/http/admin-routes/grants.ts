import { z } from 'zod';
import type { Deps } from '../../deps.js';
import { normaliseEmail } from '../../accounts/users.js';
import { isCountryCode } from '../../geo/countries.js';
import { CLIENT_ID_SYNTAX } from '../../oauth/client-auth.js';
import { countGrantsByOriginQuery, DRY_RUN_SAMPLE, findGrantsByOrigin, revokeGrantsByOrigin, type OriginQuery } from '../../oauth/grants-by-origin.js';
import { adminActor, type AdminApp } from './types.js';
import { invalidInput, notFound } from './problem.js';
import { emailText, listOf, nextAfter, page, pageQuery, problems } from './schemas.js';

const tags = ['grants'];

const MAX_ASN = 4_294_967_295;
const SIGNALS = ['country_mismatch', 'hosting_network', 'relay_network', 'unknown_location', 'redeemer_mismatch'] as const;

const asn = z
  .string()
  .regex(/^(?:AS)?\d{1,10}$/i, 'an AS number is a whole number from 0 to 4294967295 (AS prefix allowed)')
  .transform((text) => Number(text.replace(/^AS/i, '')))
  .refine((n) => n <= MAX_ASN, 'an AS number is a whole number from 0 to 4294967295');

const country = z
  .string()
  .regex(/^[A-Za-z]{2}$/, 'a country is an ISO 3166-1 alpha-2 code such as DE')
  .transform((code) => code.toUpperCase())
  .refine(isCountryCode, 'not an ISO 3166-1 alpha-2 country code');

const flag = z.union([z.boolean(), z.enum(['true', 'false']).transform((text) => text === 'true')]);
const instant = z.iso.datetime({ offset: true });

/** An approval window that ends before it starts matches nothing: a mistake, said as one. */
const windowInOrder = [
  (f: { approved_after?: string | undefined; approved_before?: string | undefined }) =>
    f.approved_after === undefined || f.approved_before === undefined || Date.parse(f.approved_after) < Date.parse(f.approved_before),
  { message: 'approved_after must be before approved_before', path: ['approved_after'] as PropertyKey[] },
] as const;

/** The filters of §1, the same in a query string and in a revocation's JSON body. */
const grantFilters = {
  client: listOf(z.string().regex(CLIENT_ID_SYNTAX, 'not a client id'), 'client id').optional().describe("only these apps' grants (comma-separated)"),
  user: emailText.optional().describe("only this user's grants (email)"),
  grant_type: z.enum(['device_code', 'authorization_code']).optional(),
  asn: listOf(asn, 'AS number').optional().describe("the requester's or the redeemer's network is one of these AS numbers"),
  country: listOf(country, 'country').optional().describe('the requester or the redeemer is in one of these countries (ISO 3166-1 alpha-2)'),
  hosting: flag.optional().describe('true: the requester or the redeemer is on a hosting network; false: neither is'),
  signal: listOf(z.enum(SIGNALS), 'signal').optional().describe('the approval or the redeeming poll raised one of these proximity signals'),
  approved_after: instant.optional().describe('approved at or after this instant (ISO 8601)'),
  approved_before: instant.optional().describe('approved before this instant (ISO 8601)'),
  live: flag.optional().describe('true: only grants still live (not revoked, not expired); false: only ended ones'),
};

const filterObject = z.object(grantFilters).refine(...windowInOrder);
type ParsedFilters = z.output<typeof filterObject>;

function originQuery(f: ParsedFilters): OriginQuery {
  return {
    clientIds: f.client,
    userEmail: f.user === undefined ? undefined : normaliseEmail(f.user),
    grantType: f.grant_type,
    asns: f.asn,
    countries: f.country,
    hosting: f.hosting,
    signals: f.signal,
    approvedAfter: f.approved_after === undefined ? undefined : new Date(f.approved_after),
    approvedBefore: f.approved_before === undefined ? undefined : new Date(f.approved_before),
    live: f.live,
  };
}

const placeView = z
  .object({
    address: z.string(),
    asn: z.number().nullable(),
    network: z.string().nullable().describe('the AS organisation'),
    country: z.string().nullable().describe('ISO 3166-1 alpha-2'),
    hosting: z.boolean().nullable(),
  })
  .nullable();

const grantOriginView = z.object({
  grant_id: z.string(),
  client_id: z.string(),
  user_id: z.string(),
  user: z.string().describe('email'),
  grant_type: z.enum(['device_code', 'authorization_code']),
  scopes: z.array(z.string()),
  approved_at: z.string(),
  created_at: z.string(),
  expires_at: z.string(),
  live: z.boolean(),
  revoked_at: z.string().nullable(),
  revoked_reason: z.string().nullable(),
  requester: placeView.describe('device flow: the device that asked for the code; code flow: where the user signed in'),
  approver: placeView.describe('device flow: where the user approved'),
  redeemer: placeView.describe('device flow: where the tokens were collected from'),
  signals: z.array(z.string()).describe('raised on the approval page'),
  redeemer_signals: z.array(z.string()).describe('raised at the redeeming poll'),
  decision: z
    .object({
      action: z.string().nullable().describe('allow, warn, confirm or deny'),
      confirmed: z.boolean().nullable().describe('the user ticked "in front of me"'),
      redeemer_action: z.string().nullable(),
    })
    .nullable(),
});

type Refused = { kind: 'unknown_user'; email: string } | { kind: 'unknown_client'; clientId: string };
function refusal(refused: Refused) {
  return refused.kind === 'unknown_user' ? notFound(`no user ${refused.email}`) : notFound(`no client ${refused.clientId}`);
}

export function adminGrantRoutes(app: AdminApp, deps: Deps): void {
  app.get(
    '/admin/grants',
    {
      schema: {
        tags,
        summary: 'Grants with where they came from, by any combination of filters, in approval order (issue 31 §1)',
        querystring: z
          .object({
            ...grantFilters,
            ...pageQuery,
            after: z.uuid().optional().describe('the last grant_id of the previous page'),
          })
          .refine(...windowInOrder),
        response: { 200: page(grantOriginView), ...problems },
      },
    },
    async (request) => {
      const { limit, after, ...filters } = request.query;
      const result = await findGrantsByOrigin(deps, originQuery(filters), { after, limit });
      if (result.kind !== 'grants') throw refusal(result);
      return { items: result.grants, next_after: nextAfter(result.grants, limit, (g) => g.grant_id) };
    },
  );

  app.get(
    '/admin/grants/count',
    {
      schema: {
        tags,
        summary: 'How many grants match the filters, without the rows',
        querystring: filterObject,
        response: { 200: z.object({ count: z.number().int() }), ...problems },
      },
    },
    async (request) => {
      const result = await countGrantsByOriginQuery(deps, originQuery(request.query));
      if (result.kind !== 'count') throw refusal(result);
      return { count: result.count };
    },
  );

  app.post(
    '/admin/grants/revoke',
    {
      schema: {
        tags,
        summary: `Revoke every live grant the filters match (issue 31 §3): dry_run answers the count and ${DRY_RUN_SAMPLE} of them; a filter with no condition is refused`,
        body: z
          .object({ ...grantFilters, dry_run: z.boolean().default(false).describe('count and show, revoke nothing') })
          .strict()
          .refine(...windowInOrder),
        response: {
          200: z.union([
            z.object({ count: z.number().int(), sample: z.array(grantOriginView) }),
            z.object({ revoked: z.number().int(), operation_id: z.string().describe('named by every grant event of this revocation') }),
          ]),
          ...problems,
        },
      },
    },
    async (request) => {
      const { dry_run: dryRun, ...filters } = request.body;
      const result = await revokeGrantsByOrigin(deps, originQuery(filters), { dryRun, actor: adminActor(request) });
      if (result.kind === 'no_condition') {
        throw invalidInput(
          'a revocation needs at least one condition besides live: client, user, grant_type, asn, country, hosting, signal, approved_after or approved_before',
        );
      }
      if (result.kind === 'unknown_user' || result.kind === 'unknown_client') throw refusal(result);
      if (result.kind === 'dry_run') return { count: result.count, sample: result.sample };
      request.audit = { action: 'grants.revoke', target: result.operationId, details: { revoked: result.revoked, filters: request.body } };
      return { revoked: result.revoked, operation_id: result.operationId };
    },
  );
}
