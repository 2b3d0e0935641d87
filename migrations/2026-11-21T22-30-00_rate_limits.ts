import { sql, type Kysely } from 'kysely';

// Frozen in time: imports only kysely. Counters shared by every instance on this database.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE rate_limit_counters (
      key          text PRIMARY KEY,
      window_start timestamptz NOT NULL,
      hits         integer NOT NULL
    );
    CREATE INDEX rate_limit_counters_window_start ON rate_limit_counters (window_start);
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP TABLE rate_limit_counters`.execute(db);
}
