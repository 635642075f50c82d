// PostgreSQL connections for the whole project.
import pg from 'pg';
import { loadEndpoints } from '../config/endpoints.js';

// bigint columns (global positions) come back as strings by default; positions stay below 2^53.
pg.types.setTypeParser(pg.types.builtins.INT8, (v) => Number(v));

export type Pool = pg.Pool;
export type PoolClient = pg.PoolClient;

export function createPool(
  opts: { connectionString?: string; max?: number; application?: string } = {},
): pg.Pool {
  return new pg.Pool({
    connectionString: opts.connectionString ?? loadEndpoints().databaseUrl,
    max: opts.max ?? 10,
    application_name: opts.application ?? 'rods',
    connectionTimeoutMillis: 10_000,
  });
}

/** Runs fn in a transaction on one pooled connection; rolls back on any error. */
export async function inTransaction<T>(pool: pg.Pool, fn: (c: pg.PoolClient) => Promise<T>): Promise<T> {
  const c = await pool.connect();
  try {
    await c.query('begin');
    const out = await fn(c);
    await c.query('commit');
    return out;
  } catch (e) {
    await c.query('rollback').catch(() => {});
    throw e;
  } finally {
    c.release();
  }
}
