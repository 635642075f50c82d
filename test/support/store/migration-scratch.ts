// Running a migration's Up SQL over one campaign's rows only, to compare its backfill with what the
// live code keeps: in a transaction that is rolled back, a scratch schema first on the search path
// holds views of the named tables restricted to the campaign (simple views, so UPDATE works through
// them), and the migration's tables are created there. Scratch schemas need the owner role.
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type pg from 'pg';
import { MIGRATIONS_DIR } from '../../../platform/store/migrate.js';

/** The Up part of a migration file, without its index builds (no need in a scratch run). */
export function migrationUp(file: string): string {
  const sql = readFileSync(path.join(MIGRATIONS_DIR, file), 'utf8');
  return sql.slice(0, sql.indexOf('-- Down Migration')).replace(/create index[^;]*;/gi, '');
}

/**
 * Runs `fn` with a client inside a rolled-back transaction whose search path starts with a scratch
 * schema holding `views`: each a table name and the filter restricting it to the campaign.
 * `fn` gets the schema's name to read what the migration wrote there.
 */
export async function withScratchSchema(
  owner: pg.Pool,
  views: Record<string, string>,
  fn: (c: pg.PoolClient, schema: string) => Promise<void>,
): Promise<void> {
  const schema = `scratch_${randomUUID().slice(0, 8)}`;
  const c = await owner.connect();
  try {
    await c.query('begin');
    await c.query(`create schema ${schema}`);
    for (const [table, where] of Object.entries(views))
      await c.query(`create view ${schema}.${table} as select * from public.${table} where ${where}`);
    await c.query(`set local search_path = ${schema}, public`);
    await fn(c, schema);
  } finally {
    await c.query('rollback');
    c.release();
  }
}
