import { sql, type RawBuilder } from 'kysely';

/**
 * "A bound grant needs its key", the one rule of DPoP binding every credential follows: a device
 * request bound at its start (draft-parecki-oauth-dpop-device-flow), an authorization code
 * requested with dpop_jkt (RFC 9449 §10), a bound grant's refresh token (RFC 9449 §5) and the
 * revocation of a bound token by a public app (issue 28 §4). Unbound, anything goes; bound, only a
 * request that proved the very key it is bound to.
 */
export function keyProven(boundJkt: string | null, provenJkt: string | null): boolean {
  return boundJkt === null || boundJkt === provenJkt;
}

/**
 * The same rule as an SQL predicate, for the statements that apply it as a condition of their own
 * (the poll, the rotation): `bound` is the credential's key column, `proven` the request's key.
 */
export function keyProvenSql(bound: RawBuilder<string | null>, proven: RawBuilder<string | null>): RawBuilder<boolean> {
  return sql<boolean>`(${bound} IS NULL OR ${bound} = ${proven})`;
}
