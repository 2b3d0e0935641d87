import { sql } from 'kysely';
import { compiledOnce } from '../db/compiled-statement.js';
import type { Database } from '../db/connect.js';

const recordProofStatement = compiledOnce<{ recorded: number }, { proofHash: Uint8Array; expiresAt: Date }>(
  (p) => sql`
    INSERT INTO dpop_proofs (proof_hash, expires_at) VALUES (${p.proofHash}, ${p.expiresAt}::timestamptz)
    ON CONFLICT (proof_hash) DO NOTHING
    RETURNING 1 AS recorded`,
);

/**
 * Records a proof as used, once: of any number of concurrent calls with one hash (on any
 * instance) exactly one gets true. A row not yet purged after its expiry still refuses its hash,
 * which only the proof it names could produce, and that proof is too old by then anyway.
 */
export async function recordDpopProof(db: Database, proofHash: Uint8Array, expiresAt: Date): Promise<boolean> {
  return (await recordProofStatement(db, { proofHash, expiresAt })).rows.length === 1;
}
