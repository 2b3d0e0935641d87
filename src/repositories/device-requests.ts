import { sql, type RawBuilder } from 'kysely';
import { asynchronousCommit } from '../db/asynchronous-commit.js';
import { compiledOnce } from '../db/compiled-statement.js';
import type { Database } from '../db/connect.js';
import type { ClientKind, DeniedReason, DeviceRequestStatus, NewDeviceRequest } from '../db/schema.js';
import { eventTypeLiteral } from '../events/event-log.js';

// Every transition of a request writes its event in its own statement (a CTE inserting into
// events from the rows the change returned): the event commits exactly when the change does, and
// no transition costs a round trip more than it did.

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
    WITH inserted AS (
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
      RETURNING request_id, client_id, scopes, created_at, requester_ip
    ),
    event AS (
      INSERT INTO events (type, client_id, client_ip, created_at, data)
      SELECT ${eventTypeLiteral('device_request.created')}, client_id, requester_ip, created_at,
             jsonb_build_object('request_id', request_id::text, 'scopes', scopes)
      FROM inserted
    )
    SELECT request_id FROM inserted`,
);

/**
 * Inserts a request while its app is enabled, with its device_request.created event, in one
 * statement. Returns its id, or undefined when nothing was inserted (and nothing recorded): the
 * user code is one a kept request already has, or the app is disabled.
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
  /**
   * Where the request came from and where its approver was, for an approved request only (null
   * otherwise): the redeeming poll is judged against both (assessRedeemer).
   */
  requester_ip: string | null;
  approver_ip: string | null;
}

/** The values the device-code grant's poll rules read, as SQL expressions of the poll's statement. */
export interface PollValues {
  status: RawBuilder<DeviceRequestStatus>;
  /** The previous poll's time, or the request's issue for the first poll. */
  previousPollAt: RawBuilder<Date>;
  intervalSeconds: RawBuilder<number>;
  /** When the server received this poll. */
  now: RawBuilder<Date>;
}

/** The device-code grant's rules for a poll (oauth/grant-types/device-code.rules.ts), applied by its one statement. */
export interface PollRules {
  /** Whether this poll came too soon after the previous one: it gets slow_down. */
  tooSoon(values: PollValues): RawBuilder<boolean>;
  /** What a poll too soon adds to the request's interval, in seconds. */
  slowDownStepSeconds: number;
  /** Whether the poll may touch a request bound to a key (`bound`), having proven `proven`. */
  keyProven(bound: RawBuilder<string | null>, proven: RawBuilder<string | null>): RawBuilder<boolean>;
}

/**
 * One UPDATE per poll: records the poll time and applies the slow_down rule (RFC 8628 §3.5), and
 * returns what the answer must be. A poll that the rules find too soon grows the interval.
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
 *
 * The rules are given once, when the grant type makes its recorder; the statement is compiled on
 * its first use, with the rules' constants as literals.
 */
export function devicePollRecorder(rules: PollRules) {
  // The time is one parameter, named once (this_call.at), rather than one per use.
  const tooSoon = rules.tooSoon({
    status: sql`d.status`,
    previousPollAt: sql`coalesce(d.last_polled_at, d.created_at)`,
    intervalSeconds: sql`d.interval_seconds`,
    now: sql`this_call.at`,
  });
  const statement = compiledOnce<PollOutcome, { deviceCodeHash: Uint8Array; clientId: string; dpopJkt: string | null; now: Date }>(
    (p) => sql`
      UPDATE device_requests d
      SET last_polled_at = this_call.at,
          last_poll_too_fast = ${tooSoon},
          interval_seconds = d.interval_seconds + CASE WHEN ${tooSoon} THEN ${sql.lit(rules.slowDownStepSeconds)} ELSE 0 END
      FROM clients c, (SELECT ${p.now}::timestamptz AS at, ${asynchronousCommit} AS async_commit) this_call
      WHERE d.device_code_hash = ${p.deviceCodeHash} AND d.client_id = ${p.clientId} AND c.client_id = d.client_id
        AND ${rules.keyProven(sql`d.dpop_jkt`, sql`${p.dpopJkt}::text`)}
      RETURNING d.request_id::text AS request_id, c.disabled_at IS NOT NULL AS client_disabled, d.status,
                d.denied_reason, d.expires_at <= this_call.at AS expired, d.last_poll_too_fast AS throttled,
                d.interval_seconds,
                -- Only the redeeming poll is judged against where the request came from (assessRedeemer).
                CASE WHEN d.status = 'approved' THEN d.requester_ip END AS requester_ip,
                CASE WHEN d.status = 'approved' THEN d.approver_ip END AS approver_ip`,
  );
  return async function recordDevicePoll(
    db: Database,
    deviceCodeHash: Uint8Array,
    clientId: string,
    dpopJkt: string | null,
    now: Date,
  ): Promise<PollOutcome | undefined> {
    // The asynchronous commit would extend to everything else the transaction writes.
    if (db.isTransaction) throw new Error('recordDevicePoll commits asynchronously: it must not run inside a transaction');
    return (await statement(db, { deviceCodeHash, clientId, dpopJkt, now })).rows[0];
  };
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
      'decided_at',
    ])
    .executeTakeFirst();
}

export async function setDeviceRequestGrant(db: Database, requestId: string, grantId: string): Promise<void> {
  await db.updateTable('device_requests').set({ grant_id: grantId }).where('request_id', '=', requestId).execute();
}

/**
 * approved -> denied, once: the redeeming poll came from where the operator's policy refuses
 * (PROXIMITY_POLICY_*, assessRedeemer), with its device_request.refused event (reason
 * redeemer_mismatch), in one statement. Every later poll of the request hears access_denied.
 */
export async function denyApprovedForRedeemer(db: Database, requestId: string, redeemerIp: string, now: Date): Promise<boolean> {
  const result = await sql<{ request_id: string }>`
    WITH refused AS (
      UPDATE device_requests
      SET status = 'denied', denied_reason = 'redeemer_mismatch', redeemer_ip = ${redeemerIp}::text, decided_at = ${now}::timestamptz
      WHERE request_id = ${requestId}::bigint AND status = 'approved'
      RETURNING request_id, client_id, user_id, redeemer_ip, decided_at
    ),
    event AS (
      INSERT INTO events (type, user_id, client_id, reason, client_ip, created_at, data)
      SELECT ${eventTypeLiteral('device_request.refused')}, user_id, client_id, 'redeemer_mismatch', redeemer_ip, decided_at,
             jsonb_build_object('request_id', request_id::text)
      FROM refused
    )
    SELECT request_id::text AS request_id FROM refused`.execute(db);
  return result.rows.length > 0;
}

/** A banned user's approval never turns into tokens: denied, with its device_request.denied event (reason user_banned). */
export async function denyRedeemedForBannedUser(db: Database, requestId: string, now: Date): Promise<void> {
  await sql`
    WITH denied AS (
      UPDATE device_requests
      SET status = 'denied', denied_reason = 'user_banned', decided_at = ${now}::timestamptz
      WHERE request_id = ${requestId}::bigint
      RETURNING request_id, client_id, user_id, decided_at
    )
    INSERT INTO events (type, user_id, client_id, reason, created_at, data)
    SELECT ${eventTypeLiteral('device_request.denied')}, user_id, client_id, 'user_banned', decided_at, jsonb_build_object('request_id', request_id::text)
    FROM denied`.execute(db);
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
 * whose device shows none, when none was picked), denied otherwise; once, with its event
 * (device_request.approved, or device_request.cancelled with reason wrong_phrase) in the same
 * statement. The WHERE clause is the whole rule: a request that was decided, redeemed or has
 * expired never changes again. Returns the new status, or undefined when this call changed nothing.
 */
export async function approveDeviceRequest(
  db: Database,
  requestId: string,
  approval: { userId: string; authTime: Date; pickedPhrase: string | null; context: string | null; approverIp: string | null },
  now: Date,
): Promise<'approved' | 'denied' | undefined> {
  const result = await sql<{ status: 'approved' | 'denied' }>`
    WITH decided AS (
      UPDATE device_requests
      SET status = CASE WHEN phrase IS NOT DISTINCT FROM ${approval.pickedPhrase}::text THEN 'approved' ELSE 'denied' END,
          denied_reason = CASE WHEN phrase IS NOT DISTINCT FROM ${approval.pickedPhrase}::text THEN NULL ELSE 'wrong_phrase' END,
          user_id = ${approval.userId}::uuid,
          auth_time = ${approval.authTime}::timestamptz,
          decided_at = ${now}::timestamptz,
          decision_context = ${approval.context}::jsonb,
          approver_ip = ${approval.approverIp}::text
      WHERE request_id = ${requestId}::bigint AND status = 'pending' AND expires_at > ${now}::timestamptz
      RETURNING request_id, status, client_id, user_id, approver_ip, decided_at
    ),
    event AS (
      INSERT INTO events (type, user_id, client_id, reason, client_ip, created_at, data)
      SELECT CASE WHEN status = 'approved' THEN ${eventTypeLiteral('device_request.approved')} ELSE ${eventTypeLiteral('device_request.cancelled')} END,
             user_id, client_id, CASE WHEN status = 'approved' THEN NULL ELSE 'wrong_phrase' END, approver_ip, decided_at,
             jsonb_build_object('request_id', request_id::text)
      FROM decided
    )
    SELECT status FROM decided`.execute(db);
  return result.rows[0]?.status;
}

/**
 * pending -> denied (by the user: device_request.denied; or by the operator's policy:
 * device_request.refused, with what the decision saw), once, with its event in the same
 * statement. Returns whether this call decided it.
 */
export async function denyDeviceRequest(
  db: Database,
  requestId: string,
  denial: { userId: string; reason: 'user_denied' | 'policy'; context: string | null; ip?: string | null },
  now: Date,
): Promise<boolean> {
  const type = eventTypeLiteral(denial.reason === 'policy' ? 'device_request.refused' : 'device_request.denied');
  const result = await sql<{ request_id: string }>`
    WITH denied AS (
      UPDATE device_requests
      SET status = 'denied', denied_reason = ${denial.reason}::text, user_id = ${denial.userId}::uuid, decided_at = ${now}::timestamptz,
          decision_context = ${denial.context}::jsonb
      WHERE request_id = ${requestId}::bigint AND status = 'pending' AND expires_at > ${now}::timestamptz
      RETURNING request_id, client_id, user_id, denied_reason, decided_at, decision_context
    ),
    event AS (
      INSERT INTO events (type, user_id, client_id, reason, client_ip, created_at, data)
      SELECT ${type}, user_id, client_id, denied_reason, ${denial.ip ?? null}::text, decided_at,
             jsonb_build_object('request_id', request_id::text, 'decision', decision_context)
      FROM denied
    )
    SELECT request_id::text AS request_id FROM denied`.execute(db);
  return result.rows.length > 0;
}

/** Requests the user approved whose device has not yet picked up its tokens (and still may). */
export async function listApprovedAwaitingDevice(db: Database, userId: string, kinds: readonly ClientKind[], now: Date) {
  return db
    .selectFrom('device_requests as d')
    .innerJoin('clients as c', 'c.client_id', 'd.client_id')
    .select([
      sql<string>`d.request_id::text`.as('request_id'),
      'd.platform_name',
      'd.decided_at',
      'c.client_id',
      'c.name as client_name',
      'c.kind as client_kind',
    ])
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
 * gets its tokens or access_denied, never both. Each cancelled request's device_request.denied
 * event (reason user_denied, after_approval) is written by the same statement. Returns how many
 * it cancelled.
 */
async function cancelApproved(
  db: Database,
  userId: string,
  which: { requestId: string } | { clientId: string },
  context: { now: Date; ip: string | null; actor: string | null },
): Promise<number> {
  const match = 'requestId' in which ? sql`request_id = ${which.requestId}::bigint` : sql`client_id = ${which.clientId}::text`;
  const result = await sql<{ cancelled: number }>`
    WITH cancelled AS (
      UPDATE device_requests
      SET status = 'denied', denied_reason = 'user_denied', decided_at = ${context.now}::timestamptz
      WHERE user_id = ${userId}::uuid AND status = 'approved' AND expires_at > ${context.now}::timestamptz AND ${match}
      RETURNING request_id, client_id, user_id, decided_at
    ),
    event AS (
      INSERT INTO events (type, user_id, client_id, reason, client_ip, created_at, data, actor)
      SELECT ${eventTypeLiteral('device_request.denied')}, user_id, client_id, 'user_denied', ${context.ip}::text, decided_at,
             jsonb_build_object('request_id', request_id::text, 'after_approval', true), ${context.actor}::jsonb
      FROM cancelled
    )
    SELECT count(*)::int AS cancelled FROM cancelled`.execute(db);
  return result.rows[0]?.cancelled ?? 0;
}

/** One waiting approval of this user (the Devices page's Cancel). */
export async function cancelApprovedRequest(db: Database, userId: string, requestId: string, now: Date, ip: string | null = null): Promise<boolean> {
  return (await cancelApproved(db, userId, { requestId }, { now, ip, actor: null })) > 0;
}

/** Every waiting approval of this user for one app (Connected apps' Remove access); `actor`: the operator's, as JSON, when it was one. */
export async function cancelApprovedRequestsOfApp(
  db: Database,
  userId: string,
  clientId: string,
  context: { now: Date; ip: string | null; actor: string | null },
): Promise<number> {
  return cancelApproved(db, userId, { clientId }, context);
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
