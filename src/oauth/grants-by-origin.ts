import { randomUUID } from 'node:crypto';
import type { GrantType } from '../db/schema.js';
import type { Deps } from '../deps.js';
import { countGrantsByOrigin, findExistingClientIds, listGrantsByOrigin, selectLiveGrantIdsByOrigin, type GrantFilter } from '../repositories/grant-origins.js';
import { findUserByEmail } from '../repositories/users.js';
import type { Actor } from '../events/event-log.js';
import { revokeGrants } from './grant-revocation.js';

/**
 * Issue 31 §1 and §3: an operator sees a device-code phishing campaign by where its grants came
 * from (networks, countries, hosting, signals, approval window) and undoes it in one command.
 */

/** What the operator asked for, as the admin API parsed it (every value already validated). */
export interface OriginQuery {
  clientIds?: string[] | undefined;
  /** Normalised. */
  userEmail?: string | undefined;
  grantType?: GrantType | undefined;
  asns?: number[] | undefined;
  countries?: string[] | undefined;
  hosting?: boolean | undefined;
  signals?: string[] | undefined;
  approvedAfter?: Date | undefined;
  approvedBefore?: Date | undefined;
  live?: boolean | undefined;
}

export interface PlaceView {
  address: string;
  asn: number | null;
  network: string | null;
  country: string | null;
  hosting: boolean | null;
}

export interface GrantOriginView {
  grant_id: string;
  client_id: string;
  user_id: string;
  user: string;
  grant_type: GrantType;
  scopes: string[];
  approved_at: string;
  created_at: string;
  expires_at: string;
  live: boolean;
  revoked_at: string | null;
  revoked_reason: string | null;
  /** Device flow: the device that asked; code flow: where the user signed in. */
  requester: PlaceView | null;
  approver: PlaceView | null;
  redeemer: PlaceView | null;
  /** Raised by the approval page, and by the redeeming poll. */
  signals: string[];
  redeemer_signals: string[];
  /** Device flow: what the approval page decided, whether "in front of me" was ticked, what the redeeming poll's check came to. */
  decision: { action: string | null; confirmed: boolean | null; redeemer_action: string | null } | null;
}

type Refusal = { kind: 'unknown_user'; email: string } | { kind: 'unknown_client'; clientId: string };

/** The most grants one revoking statement touches: each batch is its own short transaction. */
const REVOCATION_BATCH = 1000;
/** How many of the matching grants a dry run shows. */
export const DRY_RUN_SAMPLE = 10;

async function resolve(deps: Pick<Deps, 'db'>, query: OriginQuery): Promise<{ kind: 'filter'; filter: GrantFilter } | Refusal> {
  let userId: string | undefined;
  if (query.userEmail !== undefined) {
    const user = await findUserByEmail(deps.db, query.userEmail);
    if (!user) return { kind: 'unknown_user', email: query.userEmail };
    userId = user.user_id;
  }
  if (query.clientIds !== undefined) {
    const existing = await findExistingClientIds(deps.db, query.clientIds);
    const missing = query.clientIds.find((id) => !existing.has(id));
    if (missing !== undefined) return { kind: 'unknown_client', clientId: missing };
  }
  const { userEmail: _email, ...rest } = query;
  return { kind: 'filter', filter: { ...rest, userId } };
}

function place(address: string | null, asn: string | number | null, network: string | null, country: string | null, hosting: boolean | null): PlaceView | null {
  return address === null ? null : { address, asn: asn === null ? null : Number(asn), network, country, hosting };
}

type GrantRow = Awaited<ReturnType<typeof listGrantsByOrigin>>[number];

function toView(row: GrantRow, now: Date): GrantOriginView {
  const device = row.grant_type === 'device_code';
  return {
    grant_id: row.grant_id,
    client_id: row.client_id,
    user_id: row.user_id,
    user: row.email,
    grant_type: row.grant_type,
    scopes: row.scopes,
    approved_at: row.approved_at.toISOString(),
    created_at: row.created_at.toISOString(),
    expires_at: row.expires_at.toISOString(),
    live: row.revoked_at === null && row.expires_at.getTime() > now.getTime(),
    revoked_at: row.revoked_at?.toISOString() ?? null,
    revoked_reason: row.revoked_reason,
    requester: place(row.signed_in_ip, row.requester_asn, row.requester_network, row.requester_country, row.requester_hosting),
    approver: place(row.approver_ip, row.approver_asn, row.approver_network, row.approver_country, row.approver_hosting),
    redeemer: place(row.redeemer_ip, row.redeemer_asn, row.redeemer_network, row.redeemer_country, row.redeemer_hosting),
    signals: row.approval_signals ?? [],
    redeemer_signals: row.redeemer_signals ?? [],
    decision: device ? { action: row.decision, confirmed: row.decision_confirmed, redeemer_action: row.redeemer_action } : null,
  };
}

export async function findGrantsByOrigin(
  deps: Pick<Deps, 'db' | 'clock'>,
  query: OriginQuery,
  page: { after?: string | undefined; limit: number },
): Promise<{ kind: 'grants'; grants: GrantOriginView[] } | Refusal> {
  const resolved = await resolve(deps, query);
  if (resolved.kind !== 'filter') return resolved;
  const now = deps.clock.now();
  const rows = await listGrantsByOrigin(deps.db, resolved.filter, { afterGrantId: page.after, limit: page.limit }, now);
  return { kind: 'grants', grants: rows.map((row) => toView(row, now)) };
}

export async function countGrantsByOriginQuery(deps: Pick<Deps, 'db' | 'clock'>, query: OriginQuery): Promise<{ kind: 'count'; count: number } | Refusal> {
  const resolved = await resolve(deps, query);
  if (resolved.kind !== 'filter') return resolved;
  return { kind: 'count', count: await countGrantsByOrigin(deps.db, resolved.filter, deps.clock.now()) };
}

/** Whether the query names anything but liveness: a revocation of "every live grant" is never what an operator meant. */
function hasCondition(query: OriginQuery): boolean {
  const { live: _live, ...conditions } = query;
  return Object.values(conditions).some((value) => value !== undefined);
}

export type BulkRevocation =
  | { kind: 'dry_run'; count: number; sample: GrantOriginView[] }
  | { kind: 'revoked'; revoked: number; operationId: string }
  | { kind: 'no_condition' }
  | Refusal;

/**
 * Issue 31 §3 / RFC 10027 "detect and remediate": every live grant the query matches is revoked,
 * in batches of REVOCATION_BATCH, each one short transaction of its own (revokeGrants: the grants,
 * their access tokens, one operator_revoked event each naming the operation), so a refresh or an
 * introspection waits at most for one batch, never for the whole operation. Batches walk the
 * matching grants in grant_id order, read without locks; the revoking UPDATE re-checks that each
 * is still live, so of two operations at once each grant is revoked by exactly one. Tokens need
 * no cache invalidation: they are live only while their grant is (access-tokens.ts).
 */
export async function revokeGrantsByOrigin(deps: Deps, query: OriginQuery, options: { dryRun: boolean; actor?: Actor | null }): Promise<BulkRevocation> {
  if (!hasCondition(query)) return { kind: 'no_condition' };
  const resolved = await resolve(deps, query);
  if (resolved.kind !== 'filter') return resolved;
  const filter: GrantFilter = { ...resolved.filter, live: true };
  if (options.dryRun) {
    const now = deps.clock.now();
    const [count, sample] = await Promise.all([countGrantsByOrigin(deps.db, filter, now), listGrantsByOrigin(deps.db, filter, { limit: DRY_RUN_SAMPLE }, now)]);
    return { kind: 'dry_run', count, sample: sample.map((row) => toView(row, now)) };
  }
  const operationId = randomUUID();
  const details = JSON.stringify({ operation_id: operationId });
  let after: string | null = null;
  let revoked = 0;
  for (;;) {
    const ids = await selectLiveGrantIdsByOrigin(deps.db, filter, after, REVOCATION_BATCH, deps.clock.now());
    if (ids.length === 0) break;
    after = ids[ids.length - 1]!;
    const now = deps.clock.now();
    const batch = await deps.db
      .transaction()
      .execute((trx) => revokeGrants(trx, { grantIds: ids }, 'operator_revoked', { now, ip: null, details, actor: options.actor ?? null }));
    revoked += batch.length;
    deps.metrics.grantRevocations.inc({ reason: 'operator_revoked' }, batch.length);
    if (ids.length < REVOCATION_BATCH) break;
  }
  return { kind: 'revoked', revoked, operationId };
}
