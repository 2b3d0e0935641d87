import pg from 'pg';

/**
 * A second PostgreSQL connection with a transaction open, for race tests: it takes row locks,
 * lets requests queue up behind them, and commits once they wait. The embedded database has one
 * connection, so these tests run on PostgreSQL only.
 */
export interface LockHolder {
  /** A statement in the open transaction; one that fails disconnects (rolling back), so no test leaves the connection open. */
  query(text: string, values?: unknown[]): Promise<pg.QueryResult>;
  /** Resolves once `waiters` connections of this database wait on a lock, or after about 5 s. */
  waitForWaiters(waiters: number): Promise<void>;
  /** Commits once `waiters` connections of this database wait on a lock (or after about 5 s), and disconnects. */
  commitWhenWaiting(waiters: number): Promise<void>;
}

export async function holdLocks(databaseUrl: string): Promise<LockHolder> {
  const holder = new pg.Client({ connectionString: databaseUrl });
  await holder.connect();
  try {
    await holder.query('BEGIN');
  } catch (error) {
    await holder.end();
    throw error;
  }
  const waitForWaiters = async (waiters: number) => {
    for (let i = 0; i < 500; i++) {
      // Inside a transaction, pg_stat_activity is read once unless the snapshot is cleared.
      await holder.query('SELECT pg_stat_clear_snapshot()');
      const { rows } = await holder.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'");
      if (rows[0].n >= waiters) return;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  };
  return {
    async query(text, values) {
      try {
        return await holder.query(text, values);
      } catch (error) {
        await holder.end();
        throw error;
      }
    },
    async waitForWaiters(waiters) {
      try {
        await waitForWaiters(waiters);
      } catch (error) {
        await holder.end();
        throw error;
      }
    },
    async commitWhenWaiting(waiters) {
      try {
        await waitForWaiters(waiters);
        await holder.query('COMMIT');
      } finally {
        await holder.end();
      }
    },
  };
}
