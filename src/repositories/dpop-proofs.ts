import { sql } from 'kysely';
import { asynchronousCommit } from '../db/asynchronous-commit.js';
import { compiledOnce } from '../db/compiled-statement.js';
import type { Database } from '../db/connect.js';

const recordProofStatement = compiledOnce<{ recorded: number }, { proofHash: Uint8Array; expiresAt: Date }>(
  (p) => sql`
    INSERT INTO dpop_proofs (proof_hash, expires_at)
    SELECT ${p.proofHash}, ${p.expiresAt}::timestamptz FROM (SELECT ${asynchronousCommit} AS async_commit) this_call
    ON CONFLICT (proof_hash) DO NOTHING
    RETURNING 1 AS recorded`,
);

/**
 * Records a proof as used, once: of any number of concurrent calls with one hash (on any
 * instance) exactly one gets true. A row not yet purged after its expiry still refuses its hash,
 * which only the proof it names could produce, and that proof is too old by then anyway.
 *
 * It commits asynchronously, like a poll (db/asynchronous-commit.ts): a crash may forget the proofs
 * of its last fraction of a second, and those could then be replayed within their minute. What a
 * replay could win is still once-only and durable on its own: a device request's redemption, a
 * code, a refresh token's rotation. Waiting for the flush doubled a DPoP poll's database cost.
 */
export async function recordDpopProof(db: Database, proofHash: Uint8Array, expiresAt: Date): Promise<boolean> {
  if (db.isTransaction) throw new Error('recordDpopProof commits asynchronously: it must not run inside a transaction');
  return (await recordProofStatement(db, { proofHash, expiresAt })).rows.length === 1;
}
