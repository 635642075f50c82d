// Versioned SQL migrations (node-pg-migrate), kept as small named files in store/migrations.
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { runner } from 'node-pg-migrate';
import { loadEndpoints } from '../config/endpoints.js';
import { backoffMs, createClient, isConnectionError } from './db.js';

export const MIGRATIONS_DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), 'migrations');

export interface MigrateResult {
  applied: string[];
}

/** Applies pending migrations; safe to call from several processes at once (advisory lock). */
export async function migrate(
  opts: { databaseUrl?: string; direction?: 'up' | 'down'; count?: number } = {},
): Promise<MigrateResult> {
  // node-pg-migrate's own lock fails when another process migrates; wait for ours instead, so
  // that several processes starting at once (aggregators, tests) all succeed.
  const client = createClient({
    connectionString: opts.databaseUrl ?? loadEndpoints().databaseUrl,
    application: 'rods-migrate',
  });
  await client.connect();
  try {
    await client.query("select pg_advisory_lock(hashtextextended('rods-migrate', 0))");
    const ran = await runner({
      dbClient: client,
      noLock: true,
      dir: MIGRATIONS_DIR,
      direction: opts.direction ?? 'up',
      count: opts.count ?? Number.POSITIVE_INFINITY,
      migrationsTable: 'rods_migrations',
      checkOrder: true,
      singleTransaction: true,
      logger: { debug() {}, info() {}, warn: console.warn, error: console.error },
    });
    return { applied: ran.map((m) => m.name) };
  } finally {
    await client.end().catch(() => {});
  }
}

/**
 * migrate() for long-running processes: while PostgreSQL is unreachable (a restart, an outage at
 * boot) it waits with backoff instead of exiting, saying so once; other errors are thrown.
 */
export async function migrateWhenReachable(
  opts: { signal?: AbortSignal; onWait?: (e: Error) => void } = {},
): Promise<MigrateResult> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await migrate();
    } catch (e) {
      if (!isConnectionError(e) || opts.signal?.aborted) throw e;
      if (attempt === 0)
        (opts.onWait ?? ((x) => console.error(`PostgreSQL unreachable (${x.message}); waiting for it ...`)))(
          e as Error,
        );
      await sleep(backoffMs(attempt));
    }
  }
}
