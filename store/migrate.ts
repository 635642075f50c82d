// Versioned SQL migrations (node-pg-migrate), kept as small named files in store/migrations.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { runner } from 'node-pg-migrate';
import { loadEndpoints } from '../config/endpoints.js';

export const MIGRATIONS_DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), 'migrations');

export interface MigrateResult {
  applied: string[];
}

/** Applies pending migrations; safe to call from several processes at once (advisory lock). */
export async function migrate(
  opts: { databaseUrl?: string; direction?: 'up' | 'down'; count?: number } = {},
): Promise<MigrateResult> {
  const quiet = { debug() {}, info() {}, warn: console.warn, error: console.error };
  const ran = await runner({
    databaseUrl: opts.databaseUrl ?? loadEndpoints().databaseUrl,
    dir: MIGRATIONS_DIR,
    direction: opts.direction ?? 'up',
    count: opts.count ?? Number.POSITIVE_INFINITY,
    migrationsTable: 'rods_migrations',
    checkOrder: true,
    singleTransaction: true,
    logger: quiet,
  });
  return { applied: ran.map((m) => m.name) };
}
