// Advisory locks, named by a text key (hashed to PostgreSQL's 64-bit lock id). The one place that
// spells the lock SQL, so every owner and stage takes the same kind of lock for the same name.
import type pg from 'pg';

/** Holds the lock named `key` until the transaction ends (commit or rollback releases it). */
export async function lockForTransaction(c: pg.ClientBase, key: string): Promise<void> {
  await c.query('select pg_advisory_xact_lock(hashtextextended($1, 0))', [key]);
}

/** Holds the lock named `key` for the connection's session, until `unlockSession` or disconnect. */
export async function lockForSession(c: pg.ClientBase, key: string): Promise<void> {
  await c.query('select pg_advisory_lock(hashtextextended($1, 0))', [key]);
}

/** Releases every session lock the connection holds. */
export async function unlockSession(c: pg.ClientBase): Promise<void> {
  await c.query('select pg_advisory_unlock_all()');
}
