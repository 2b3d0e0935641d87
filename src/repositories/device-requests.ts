import { sql } from 'kysely';
import { asynchronousCommit } from '../db/asynchronous-commit.js';
import { compiledOnce } from '../db/compiled-statement.js';
import type { Database } from '../db/connect.js';
import type { ClientKind, DeniedReason, DeviceRequestStatus, NewDeviceRequest } from '../db/schema.js';

/** What a code issuance stores; the platform texts are null when the device sent none. */
type DeviceRequestValues = Pick<
  Required<NewDeviceRequest>,
  | 'device_code_hash'
  | 'user_code_hmac'
  | 'client_id'
  | 'scopes'
  | 'platform_name'
  | 'platform_description'
  | 'platform_icon'
  | 'phrase'
  | 'phrase_choices'
  | 'interval_seconds'
  | 'created_at'
  | 'expires_at'
  | 'requester_ip'
  | 'requester_user_agent'
  | 'dpop_jkt'
>;

const insertDeviceRequestStatement = compiledOnce<{ request_id: string }, DeviceRequestValues>(
  (r) => sql`
    INSERT INTO device_requests (device_code_hash, user_code_hmac, client_id, scopes, platform_name,
                                 platform_description, platform_icon, phrase, phrase_choices,
                                 interval_seconds, created_at, expires_at, requester_ip, requester_user_agent, dpop_jkt)
    SELECT ${r.device_code_hash}, ${r.user_code_hmac}, c.client_id, ${r.scopes}::text[],
           ${r.platform_name}::text, ${r.platform_description}::text,
           ${r.platform_icon}::text, ${r.phrase}::text, ${r.phrase_choices}::text[],
           ${r.interval_seconds}::integer, ${r.created_at}::timestamptz, ${r.expires_at}::timestamptz,
           ${r.requester_ip}::text, ${r.requester_user_agent}::text, ${r.dpop_jkt}::text
    FROM clients c
    WHERE c.client_id = ${r.client_id} AND c.disabled_at IS NULL
    -- A user code names one request while the request is kept, whatever its status.
    ON CONFLICT (user_code_hmac) DO NOTHING
    RETURNING request_id`,
);

/**
 * Inserts a request while its app is enabled, in one statement. Returns its id, or undefined when
 * nothing was inserted: the user code is one a kept request already has, or the app is disabled.
 *
 * The app is read here, not locked: no foreign key makes each issuance lock the one row that all
 * of an app's issuances share (migration 2026-11-23T12-00-00_device_requests_do_not_lock_their_app).
 *
 * Written as SQL rather than with the query builder: on the code issuance path, building this
 * statement's query tree cost about a sixth of the server's CPU (npm run bench -- --profile).
 */
export async function insertDeviceRequest(db: Database, request: DeviceRequestValues): Promise<string | undefined> {
  const inserted = (await insertDeviceRequestStatement(db, request)).rows[0];
  return inserted && String(inserted.request_id);
}

export interface PollOutcome {
  request_id: string;
  client_disabled: boolean;
  status: DeviceRequestStatus;
  denied_reason: DeniedReason | null;
  expired: boolean;
  throttled: boolean;
  interval_seconds: number;
  /** Where the request came from and where its approver was: the redeeming poll is judged against both (assessRedeemer). */
  requester_ip: string | null;
  approver_ip: string | null;
}

/**
 * One UPDATE per poll: records the poll time and applies the slow_down rule (RFC 8628 §3.5), and
 * returns what the answer must be. A poll sooner than the current interval after the previous one
 * (or after issue) grows the interval by 5 seconds, less a tolerance: both times are when the
 * server received the poll, and a device that waits exactly `interval` between sends must not
 * lose to a few milliseconds of network or scheduling jitter. The tolerance is the larger of 10 %
 * of the interval and 500 ms (POLL_TOLERANCE), so at 2 s a poll 1.5 s after the previous one is on
 * time and one 0.5 s after it is slow_down.
 *
 * A request bound to a DPoP key matches only a poll that proved that key: any other changes
 * nothing (no interval grows for a poll its device did not make) and returns no row.
 *
 * SET expressions read the row's values from before this update, so "too soon" is judged against
 * the previous poll. Two polls of one code at once: the second waits for the first's row lock and
 * is then evaluated again against the row the first wrote (READ COMMITTED), so it counts as too soon.
 *
 * It commits asynchronously (db/asynchronous-commit.ts): all it writes is when the device last
 * polled and its interval, and a crash that loses the last fraction of a second of polls costs a
 * device at most one slow_down it would otherwise have got. What must survive a crash is written
 * elsewhere with a synchronous commit: the approval, and the redemption that issues the tokens.
 */
// The time is one parameter, named once (this_call.at), rather than one per use.
/** How early a poll may come: the larger of this fraction of the interval and this many seconds. */
export const POLL_TOLERANCE = { fraction: 0.1, minimumSeconds: 0.5 } as const;

// interval − max(fraction × interval, minimum) = least((1 − fraction) × interval, interval − minimum)
const tooSoon = sql<boolean>`d.status = 'pending'
  AND this_call.at < coalesce(d.last_polled_at, d.created_at) + make_interval(secs => least(
    d.interval_seconds * ${sql.lit(1 - POLL_TOLERANCE.fraction)}, d.interval_seconds - ${sql.lit(POLL_TOLERANCE.minimumSeconds)})::double precision)`;

const recordDevicePollStatement = compiledOnce<PollOutcome, { deviceCodeHash: Uint8Array; clientId: string; dpopJkt: string | null; now: Date }>(
  (p) => sql`
    UPDATE device_requests d
    SET last_polled_at = this_call.at,
        last_poll_too_fast = ${tooSoon},
        interval_seconds = d.interval_seconds + CASE WHEN ${tooSoon} THEN 5 ELSE 0 END
    FROM clients c, (SELECT ${p.now}::timestamptz AS at, ${asynchronousCommit} AS async_commit) this_call
    WHERE d.device_code_hash = ${p.deviceCodeHash} AND d.client_id = ${p.clientId} AND c.client_id = d.client_id
      AND (d.dpop_jkt IS NULL OR d.dpop_jkt = ${p.dpopJkt}::text)
    RETURNING d.request_id::text AS request_id, c.disabled_at IS NOT NULL AS client_disabled, d.status,
              d.denied_reason, d.expires_at <= this_call.at AS expired, d.last_poll_too_fast AS throttled,
              d.interval_seconds, d.requester_ip, d.approver_ip`,
);

export async function recordDevicePoll(
  db: Database,
  deviceCodeHash: Uint8Array,
  clientId: string,
  dpopJkt: string | null,
  now: Date,
): Promise<PollOutcome | undefined> {
  // The asynchronous commit would extend to everything else the transaction writes.
  if (db.isTransaction) throw new Error('recordDevicePoll commits asynchronously: it must not run inside a transaction');
  return (await recordDevicePollStatement(db, { deviceCodeHash, clientId, dpopJkt, now })).rows[0];
}

/** Whether this app's request with this device code is bound to a DPoP key: only asked when a poll found nothing. */
export async function isDeviceRequestBound(db: Database, deviceCodeHash: Uint8Array, clientId: string): Promise<boolean> {
  const row = await db
    .selectFrom('device_requests')
    .select('request_id')
    .where('device_code_hash', '=', deviceCodeHash)
    .where('client_id', '=', clientId)
    .where('dpop_jkt', 'is not', null)
    .executeTakeFirst();
  return row !== undefined;
}

/**
 * approved -> redeemed, once: of several racing polls exactly one sees a row come back.
 * Returns what the tokens are minted from; the approving user is read (and locked) apart, by
 * lockUserForIssuance.
 */
export async function redeemApprovedRequest(db: Database, requestId: string, now: Date) {
  return db
    .updateTable('device_requests')
    .set({ status: 'redeemed' })
    .where('request_id', '=', requestId)
    .where('status', '=', 'approved')
    .where('expires_at', '>', now)
    .returning([
      'request_id',
      'user_id',
      'client_id',
      'scopes',
      'platform_name',
      'platform_description',
      'platform_icon',
      'platform_icon_sha256',
      'auth_time',
      'requester_ip',
      'approver_ip',
      'decision_context',
    ])
    .executeTakeFirst();
}

export async function setDeviceRequestGrant(db: Database, requestId: string, grantId: string): Promise<void> {
  await db.updateTable('device_requests').set({ grant_id: grantId }).where('request_id', '=', requestId).execute();
}

/**
 * approved -> denied, once: the redeeming poll came from where the operator's policy refuses
 * (PROXIMITY_POLICY_*, assessRedeemer). Every later poll of the request hears access_denied.
 */
export async function denyApprovedForRedeemer(db: Database, requestId: string, redeemerIp: string, now: Date): Promise<boolean> {
  const result = await db
    .updateTable('device_requests')
    .set({ status: 'denied', denied_reason: 'redeemer_mismatch', redeemer_ip: redeemerIp, decided_at: now })
    .where('request_id', '=', requestId)
    .where('status', '=', 'approved')
    .executeTakeFirst();
  return result.numUpdatedRows > 0n;
}

/** A banned user's approval never turns into tokens. */
export async function denyRedeemedForBannedUser(db: Database, requestId: string, now: Date): Promise<void> {
  await db
    .updateTable('device_requests')
    .set({ status: 'denied', denied_reason: 'user_banned', decided_at: now })
    .where('request_id', '=', requestId)
    .execute();
}

/** The request a typed user code names (one at most: a code is unique among kept requests). */
export async function findDeviceRequestByUserCode(db: Database, userCodeHmac: Uint8Array) {
  return db
    .selectFrom('device_requests as d')
    .innerJoin('clients as c', 'c.client_id', 'd.client_id')
    .select([
      sql<string>`d.request_id::text`.as('request_id'),
      'd.status',
      'd.denied_reason',
      'd.expires_at',
      'd.created_at',
      'd.requester_ip',
      'd.scopes',
      'd.platform_name',
      'd.platform_description',
      'd.platform_icon_sha256',
      'd.phrase',
      'd.phrase_choices',
      'c.client_id',
      'c.name as client_name',
      'c.kind as client_kind',
      'c.disabled_at as client_disabled_at',
    ])
    .where('d.user_code_hmac', '=', userCodeHmac)
    .executeTakeFirst();
}

/**
 * pending -> approved when the picked phrase is the one shown on the device (or, for a request
 * whose device shows none, when none was picked), denied otherwise;
 * once. The WHERE clause is the whole rule: a request that was decided, redeemed or has expired
 * never changes again. Returns the new status, or undefined when this call changed nothing.
 */
export async function approveDeviceRequest(
  db: Database,
  requestId: string,
  approval: { userId: string; authTime: Date; pickedPhrase: string | null; context: string | null; approverIp: string | null },
  now: Date,
): Promise<'approved' | 'denied' | undefined> {
  const row = await db
    .updateTable('device_requests')
    .set((eb) => ({
      status: eb
        .case()
        .when('phrase', 'is not distinct from', approval.pickedPhrase)
        .then(sql.lit<DeviceRequestStatus>('approved'))
        .else(sql.lit<DeviceRequestStatus>('denied'))
        .end(),
      denied_reason: eb
        .case()
        .when('phrase', 'is not distinct from', approval.pickedPhrase)
        .then(sql.lit<DeniedReason | null>(null))
        .else(sql.lit<DeniedReason | null>('wrong_phrase'))
        .end(),
      user_id: approval.userId,
      auth_time: approval.authTime,
      decided_at: now,
      decision_context: approval.context,
      approver_ip: approval.approverIp,
    }))
    .where('request_id', '=', requestId)
    .where('status', '=', 'pending')
    .where('expires_at', '>', now)
    .returning('status')
    .executeTakeFirst();
  return row?.status as 'approved' | 'denied' | undefined;
}

/** pending -> denied (by the user, or by the operator's policy), once. Returns whether this call decided it. */
export async function denyDeviceRequest(
  db: Database,
  requestId: string,
  denial: { userId: string; reason: 'user_denied' | 'policy'; context: string | null },
  now: Date,
): Promise<boolean> {
  const result = await db
    .updateTable('device_requests')
    .set({ status: 'denied', denied_reason: denial.reason, user_id: denial.userId, decided_at: now, decision_context: denial.context })
    .where('request_id', '=', requestId)
    .where('status', '=', 'pending')
    .where('expires_at', '>', now)
    .executeTakeFirst();
  return result.numUpdatedRows > 0n;
}

/** Requests the user approved whose device has not yet picked up its tokens (and still may). */
export async function listApprovedAwaitingDevice(db: Database, userId: string, kinds: readonly ClientKind[], now: Date) {
  return db
    .selectFrom('device_requests as d')
    .innerJoin('clients as c', 'c.client_id', 'd.client_id')
    .select([sql<string>`d.request_id::text`.as('request_id'), 'd.platform_name', 'd.decided_at', 'c.client_id', 'c.name as client_name', 'c.kind as client_kind'])
    .where('d.user_id', '=', userId)
    .where('d.status', '=', 'approved')
    .where('d.expires_at', '>', now)
    .where('c.kind', 'in', kinds)
    .orderBy('d.decided_at', 'desc')
    .execute();
}

/**
 * approved -> denied by the approving user before the device picked up its tokens. One statement,
 * racing the redeeming poll on `status = 'approved'`: whichever commits first wins, so the device
 * gets its tokens or access_denied, never both. Returns what it cancelled.
 */
const cancelApproved = (db: Database, userId: string, now: Date) =>
  db
    .updateTable('device_requests')
    .set({ status: 'denied', denied_reason: 'user_denied', decided_at: now })
    .where('user_id', '=', userId)
    .where('status', '=', 'approved')
    .where('expires_at', '>', now);

/** One waiting approval of this user (the Devices page's Cancel). */
export async function cancelApprovedRequest(db: Database, userId: string, requestId: string, now: Date): Promise<boolean> {
  const result = await cancelApproved(db, userId, now).where('request_id', '=', requestId).executeTakeFirst();
  return result.numUpdatedRows > 0n;
}

/** Every waiting approval of this user for one app (Connected apps' Remove access). */
export async function cancelApprovedRequestsOfApp(db: Database, userId: string, clientId: string, now: Date): Promise<number> {
  const result = await cancelApproved(db, userId, now).where('client_id', '=', clientId).executeTakeFirst();
  return Number(result.numUpdatedRows);
}

/** A request of this user that the user cancelled (or denied): names it on the Devices page after a cancellation. */
export async function findRequestDeniedByUser(db: Database, userId: string, requestId: string) {
  return db
    .selectFrom('device_requests as d')
    .innerJoin('clients as c', 'c.client_id', 'd.client_id')
    .select(['c.name as client_name'])
    .where('d.request_id', '=', requestId)
    .where('d.user_id', '=', userId)
    .where('d.status', '=', 'denied')
    .where('d.denied_reason', '=', 'user_denied')
    .executeTakeFirst();
}
