// Versioned SQL migrations (node-pg-migrate), kept as small named files in platform/store/migrations.
//
// Two roles (README, "Database roles"): the owner role owns the tables and runs the migrations
// (RODS_MIGRATE_DATABASE_URL; the local stack's rods_owner), the application's role (DATABASE_URL)
// only gets the privileges it needs: it can append events and anchors but not change or delete
// them, and, not owning the tables, cannot switch the append-only trigger off either. A process
// that only has the application's role does not migrate: it checks that no migration is pending.
import { readdirSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { runner } from 'node-pg-migrate';
import type pg from 'pg';
import { loadEndpoints } from '../config/endpoints.js';
import { backoffMs, createClient, isConnectionError } from './db.js';
import { lockForSession } from './locks.js';

export const MIGRATIONS_DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), 'migrations');
const MIGRATIONS_TABLE = 'rods_migrations';

export interface MigrateResult {
  applied: string[];
}

/** Migrations are pending and this process's role may not apply them. */
export class MigrationsPendingError extends Error {
  override name = 'MigrationsPendingError';
  constructor(readonly pending: string[]) {
    super(
      `${pending.length} database migration(s) pending (${pending.join(', ')}) and the application's role cannot apply them: run \`rods migrate\` with RODS_MIGRATE_DATABASE_URL set to the owner role's URL`,
    );
  }
}

/** Tables the application may only read and append to (no UPDATE, DELETE or TRUNCATE). */
export const APPEND_ONLY_TABLES = ['events', 'audit_anchors'] as const;

const ident = (s: string) => `"${s.replaceAll('"', '""')}"`;

/**
 * Grants the application's role what it needs and nothing more: every table read and written,
 * except the append-only ones (select and insert), stream heads (no delete) and the migrations
 * table (read, to check it is current). Default privileges cover tables a later migration makes.
 * Idempotent; run by the owner of the tables.
 */
export async function grantAppRole(c: pg.ClientBase, appRole: string): Promise<void> {
  const r = ident(appRole);
  const exists = await c.query('select 1 from pg_roles where rolname = $1', [appRole]);
  if (exists.rowCount === 0) throw new Error(`the application's role ${appRole} does not exist`);
  const tables = await c.query<{ t: string }>(
    `select tablename as t from pg_tables where schemaname = 'public' and tableowner = current_user`,
  );
  const have = new Set(tables.rows.map((x) => x.t));
  await c.query(`grant usage on schema public to ${r}`);
  await c.query(
    'alter default privileges in schema public grant select, insert, update, delete on tables to ' + r,
  );
  await c.query(`alter default privileges in schema public grant usage, select on sequences to ${r}`);
  await c.query(`grant select, insert, update, delete on all tables in schema public to ${r}`);
  await c.query(`grant usage, select on all sequences in schema public to ${r}`);
  for (const t of APPEND_ONLY_TABLES)
    if (have.has(t)) await c.query(`revoke update, delete, truncate on ${ident(t)} from ${r}`);
  if (have.has('streams')) await c.query(`revoke delete, truncate on streams from ${r}`);
  if (have.has(MIGRATIONS_TABLE))
    await c.query(`revoke insert, update, delete, truncate on ${MIGRATIONS_TABLE} from ${r}`);
}

/** Names of the migration files, in order. */
export function migrationNames(): string[] {
  return readdirSync(MIGRATIONS_DIR)
    .filter((f) => /\.(sql|js|ts)$/.test(f))
    .map((f) => f.replace(/\.(sql|js|ts)$/, ''))
    .sort();
}

/** Migrations not yet applied to the database `c` is connected to. */
export async function pendingMigrations(c: pg.ClientBase): Promise<string[]> {
  const t = await c.query<{ ok: boolean }>('select to_regclass($1) is not null as ok', [MIGRATIONS_TABLE]);
  if (!t.rows[0]?.ok) return migrationNames();
  const { rows } = await c.query<{ name: string }>(`select name from ${MIGRATIONS_TABLE}`);
  const done = new Set(rows.map((r) => r.name));
  return migrationNames().filter((n) => !done.has(n));
}

function userOf(url: string): string {
  return decodeURIComponent(new URL(url).username) || process.env.PGUSER || 'postgres';
}

/**
 * Applies pending migrations; safe to call from several processes at once (advisory lock).
 * Connects as the owner role (RODS_MIGRATE_DATABASE_URL, or the local stack's) and then grants the
 * application's role (DATABASE_URL's user, or RODS_APP_ROLE). Without an owner role it runs as
 * DATABASE_URL: when nothing is pending that is a check, when something is and the role may not
 * apply it a MigrationsPendingError naming `rods migrate`.
 */
export async function migrate(
  opts: { databaseUrl?: string; appRole?: string; direction?: 'up' | 'down'; count?: number } = {},
): Promise<MigrateResult> {
  const endpoints = loadEndpoints();
  const url = opts.databaseUrl ?? endpoints.ownerDatabaseUrl ?? endpoints.databaseUrl;
  const appRole = opts.appRole ?? (process.env.RODS_APP_ROLE || userOf(endpoints.databaseUrl));
  // node-pg-migrate's own lock fails when another process migrates; wait for ours instead, so
  // that several processes starting at once (aggregators, tests) all succeed.
  const client = createClient({ connectionString: url, application: 'rods-migrate' });
  await client.connect();
  try {
    const who = (await client.query<{ u: string }>('select current_user as u')).rows[0]!.u;
    const asApp = who === appRole;
    if (asApp && (opts.direction ?? 'up') === 'up') {
      const pending = await pendingMigrations(client);
      if (pending.length === 0) return { applied: [] };
      // Not the owner of the tables (a two-role setup without the owner's URL): say what to run.
      const owner = await client.query<{ mine: boolean }>(
        'select tableowner = current_user as mine from pg_tables where schemaname = current_schema() and tablename = $1',
        [MIGRATIONS_TABLE],
      );
      if (owner.rows[0] && !owner.rows[0].mine) throw new MigrationsPendingError(pending);
    }
    await lockForSession(client, 'rods-migrate');
    let ran: { name: string }[];
    try {
      ran = await runner({
        dbClient: client,
        noLock: true,
        dir: MIGRATIONS_DIR,
        direction: opts.direction ?? 'up',
        count: opts.count ?? Number.POSITIVE_INFINITY,
        migrationsTable: MIGRATIONS_TABLE,
        checkOrder: true,
        singleTransaction: true,
        logger: { debug() {}, info() {}, warn: console.warn, error: console.error },
      });
    } catch (e) {
      // The application's role lacks the owner's privileges: say what to run instead.
      if (asApp && /permission denied|must be owner/.test(String((e as Error).message)))
        throw new MigrationsPendingError(await pendingMigrations(client).catch(() => []));
      throw e;
    }
    if (!asApp) await grantAppRole(client, appRole);
    return { applied: ran.map((m) => m.name) };
  } finally {
    await client.end().catch(() => {});
  }
}

/**
 * migrate() for long-running processes: while PostgreSQL is unreachable (a restart, an outage at
 * boot), or while migrations are pending that only the owner role may apply, it waits with
 * backoff instead of exiting, saying so once; other errors are thrown.
 */
export async function migrateWhenReachable(
  opts: { signal?: AbortSignal; onWait?: (e: Error) => void } = {},
): Promise<MigrateResult> {
  let said = '';
  for (let attempt = 0; ; attempt++) {
    try {
      return await migrate();
    } catch (e) {
      const pending = e instanceof MigrationsPendingError;
      if ((!isConnectionError(e) && !pending) || opts.signal?.aborted) throw e;
      const kind = pending ? 'pending' : 'unreachable';
      if (said !== kind) {
        said = kind;
        (
          opts.onWait ??
          ((x) =>
            console.error(
              pending
                ? `${x.message}; waiting for it ...`
                : `PostgreSQL unreachable (${x.message}); waiting for it ...`,
            ))
        )(e as Error);
      }
      await sleep(pending ? backoffMs(Math.min(attempt, 5), 5000) : backoffMs(attempt));
    }
  }
}
