import { sql, type ExpressionBuilder, type SelectQueryBuilder } from 'kysely';
import type { Database } from '../db/connect.js';
import type { DB, GrantType } from '../db/schema.js';

/** Issue 31 §1: grants by where they came from. Every field narrows; none given matches every grant. */
export interface GrantFilter {
  clientIds?: readonly string[] | undefined;
  userId?: string | undefined;
  grantType?: GrantType | undefined;
  /** The requester's or the redeemer's network: where the device was. */
  asns?: readonly number[] | undefined;
  /** The requester's or the redeemer's country. */
  countries?: readonly string[] | undefined;
  /** On a hosting network (true) or not (false), the requester or the redeemer. */
  hosting?: boolean | undefined;
  /** Raised at the approval or at the redeeming poll. */
  signals?: readonly string[] | undefined;
  approvedAfter?: Date | undefined;
  approvedBefore?: Date | undefined;
  /** Live: not revoked and not expired at `now`. */
  live?: boolean | undefined;
}

type GrantsFrom = DB & { g: DB['grants'] };

function matching(filter: GrantFilter, now: Date) {
  return (eb: ExpressionBuilder<GrantsFrom, 'g'>) => {
    const conditions = [];
    if (filter.clientIds !== undefined) conditions.push(eb('g.client_id', 'in', [...filter.clientIds]));
    if (filter.userId !== undefined) conditions.push(eb('g.user_id', '=', filter.userId));
    if (filter.grantType !== undefined) conditions.push(eb('g.grant_type', '=', filter.grantType));
    if (filter.asns !== undefined) {
      const asns = [...filter.asns];
      conditions.push(eb.or([eb('g.requester_asn', 'in', asns), eb('g.redeemer_asn', 'in', asns)]));
    }
    if (filter.countries !== undefined) {
      const countries = [...filter.countries];
      conditions.push(eb.or([eb('g.requester_country', 'in', countries), eb('g.redeemer_country', 'in', countries)]));
    }
    if (filter.hosting === true) conditions.push(eb.or([eb('g.requester_hosting', '=', true), eb('g.redeemer_hosting', '=', true)]));
    if (filter.hosting === false) {
      conditions.push(eb.and([eb('g.requester_hosting', 'is not', true), eb('g.redeemer_hosting', 'is not', true)]));
    }
    if (filter.signals !== undefined) {
      const wanted = sql`ARRAY[${sql.join([...filter.signals])}]::text[]`;
      conditions.push(sql<boolean>`(g.approval_signals && ${wanted} OR g.redeemer_signals && ${wanted})`);
    }
    if (filter.approvedAfter !== undefined) conditions.push(eb('g.approved_at', '>=', filter.approvedAfter));
    if (filter.approvedBefore !== undefined) conditions.push(eb('g.approved_at', '<', filter.approvedBefore));
    if (filter.live === true) conditions.push(eb.and([eb('g.revoked_at', 'is', null), eb('g.expires_at', '>', now)]));
    if (filter.live === false) conditions.push(eb.or([eb('g.revoked_at', 'is not', null), eb('g.expires_at', '<=', now)]));
    return eb.and(conditions);
  };
}

function grantsMatching(db: Database, filter: GrantFilter, now: Date): SelectQueryBuilder<GrantsFrom, 'g', object> {
  return db.selectFrom('grants as g').where(matching(filter, now));
}

/** A page of matching grants in approval order, after the grant `afterGrantId` (keyset), with their user's email. */
export async function listGrantsByOrigin(db: Database, filter: GrantFilter, page: { afterGrantId?: string | undefined; limit: number }, now: Date) {
  let query = grantsMatching(db, filter, now)
    .innerJoin('users as u', 'u.user_id', 'g.user_id')
    .select([
      'g.grant_id',
      'g.client_id',
      'g.user_id',
      'u.email',
      'g.grant_type',
      'g.scopes',
      'g.created_at',
      'g.approved_at',
      'g.expires_at',
      'g.revoked_at',
      'g.revoked_reason',
      'g.signed_in_ip',
      'g.requester_asn',
      'g.requester_network',
      'g.requester_country',
      'g.requester_hosting',
      'g.approver_ip',
      'g.approver_asn',
      'g.approver_network',
      'g.approver_country',
      'g.approver_hosting',
      'g.redeemer_ip',
      'g.redeemer_asn',
      'g.redeemer_network',
      'g.redeemer_country',
      'g.redeemer_hosting',
      'g.approval_signals',
      'g.redeemer_signals',
      'g.redeemer_action',
      'g.decision',
      'g.decision_confirmed',
    ])
    .orderBy('g.approved_at')
    .orderBy('g.grant_id')
    .limit(page.limit);
  if (page.afterGrantId !== undefined) {
    // Row comparison with the previous page's last grant: exact, whatever the timestamps' precision.
    const after = page.afterGrantId;
    query = query.where(sql<boolean>`(g.approved_at, g.grant_id) > (SELECT p.approved_at, p.grant_id FROM grants p WHERE p.grant_id = ${after})`);
  }
  return query.execute();
}

export async function countGrantsByOrigin(db: Database, filter: GrantFilter, now: Date): Promise<number> {
  const row = await grantsMatching(db, filter, now).select(sql<number>`count(*)::int`.as('count')).executeTakeFirstOrThrow();
  return Number(row.count);
}

/**
 * The next `limit` live grants matching the filter, in grant_id order after `afterGrantId`: one
 * batch of a bulk revocation, read without a lock (the revoking UPDATE re-checks each grant).
 */
export async function selectLiveGrantIdsByOrigin(db: Database, filter: GrantFilter, afterGrantId: string | null, limit: number, now: Date): Promise<string[]> {
  let query = grantsMatching(db, { ...filter, live: true }, now)
    .select('g.grant_id')
    .orderBy('g.grant_id')
    .limit(limit);
  if (afterGrantId !== null) query = query.where('g.grant_id', '>', afterGrantId);
  return (await query.execute()).map((row) => row.grant_id);
}

/** Those of the given apps that exist: a filter naming one that does not is refused whole. */
export async function findExistingClientIds(db: Database, clientIds: readonly string[]): Promise<Set<string>> {
  if (clientIds.length === 0) return new Set();
  const rows = await db
    .selectFrom('clients')
    .select('client_id')
    .where('client_id', 'in', [...clientIds])
    .execute();
  return new Set(rows.map((row) => row.client_id));
}
