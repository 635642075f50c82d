// PostgreSQL connections for the whole project.
//
// Every pool and client is made here, with error handlers: pg emits `error` on a connection the
// server closed (a restart, "terminating connection due to administrator command"), and an
// `error` event nobody listens to ends the process. An idle pooled connection that dies is
// dropped and the pool connects anew on demand; callers retry what failed on a lost connection
// (retryOnConnectionLoss) and each pool logs an outage once and its end once.
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import pino from 'pino';
import { loadEndpoints } from '../config/endpoints.js';

// bigint columns (global positions) come back as strings by default; positions stay below 2^53.
pg.types.setTypeParser(pg.types.builtins.INT8, (v) => Number(v));

export type Pool = pg.Pool;
export type PoolClient = pg.PoolClient;

// On stderr: commands that print JSON on stdout (status, replay, the soak) share this logger.
const log = pino(
  { level: process.env.RODS_LOG_LEVEL ?? 'info', base: { component: 'db' } },
  pino.destination(2),
);

// Connection exceptions (class 08), the server shutting down or starting (57P01-57P03), too
// many connections (53300), and socket-level failures: the statement is not at fault.
const LOST_CODES = new Set([
  '57P01',
  '57P02',
  '57P03',
  '53300',
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EAI_AGAIN',
]);
const LOST_MESSAGES =
  /Connection terminated|Client has encountered a connection error|timeout exceeded when trying to connect|the database system is (starting up|shutting down|in recovery mode)|terminating connection/i;

// The database can answer but not take the work for now: disk full (53100), out of memory
// (53200), read-only (25006, a standby or default_transaction_read_only), a statement or lock
// timeout (57014, 55P03), a serialization failure or deadlock (40001, 40P01). The request is not
// at fault: the gateway answers 503 with Retry-After, the aggregator retries.
const UNAVAILABLE_CODES = new Set(['53100', '53200', '25006', '57014', '55P03', '40001', '40P01']);

/** True when PostgreSQL refused the work for a reason of its own (UNAVAILABLE_CODES). */
export function isDatabaseUnavailable(e: unknown): boolean {
  const code = (e as { code?: unknown })?.code;
  return typeof code === 'string' && UNAVAILABLE_CODES.has(code);
}

/** The session limits every rods connection gets, from the environment (milliseconds; 0: none). */
export interface SessionLimits {
  /** A statement running longer is cancelled (RODS_PG_STATEMENT_TIMEOUT_MS, default 120 s). */
  statementTimeoutMs: number;
  /** A lock wait longer is given up (RODS_PG_LOCK_TIMEOUT_MS, default 30 s). */
  lockTimeoutMs: number;
  /**
   * A session idle inside a transaction longer is ended by the server, its locks and snapshot
   * released (RODS_PG_IDLE_IN_TRANSACTION_TIMEOUT_MS, default 60 s): a half-open client can no
   * longer hold the plan lock and the relay's horizon for the hours TCP takes to notice.
   */
  idleInTransactionTimeoutMs: number;
  /** TCP keepalive probes start after this idle time (RODS_PG_KEEPALIVE_MS, default 10 s). */
  keepAliveMs: number;
}

function envMs(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 0)
    throw new Error(`${name} must be a whole number of milliseconds >= 0, got ${raw}`);
  return n;
}

export function sessionLimits(over: Partial<SessionLimits> = {}): SessionLimits {
  return {
    statementTimeoutMs: envMs('RODS_PG_STATEMENT_TIMEOUT_MS', 120_000),
    lockTimeoutMs: envMs('RODS_PG_LOCK_TIMEOUT_MS', 30_000),
    idleInTransactionTimeoutMs: envMs('RODS_PG_IDLE_IN_TRANSACTION_TIMEOUT_MS', 60_000),
    keepAliveMs: envMs('RODS_PG_KEEPALIVE_MS', 10_000),
    ...over,
  };
}

function sessionConfig(limits: SessionLimits) {
  return {
    keepAlive: true,
    keepAliveInitialDelayMillis: limits.keepAliveMs,
    statement_timeout: limits.statementTimeoutMs,
    lock_timeout: limits.lockTimeoutMs,
    idle_in_transaction_session_timeout: limits.idleInTransactionTimeoutMs,
  };
}

/** True when an error means the connection to PostgreSQL was lost or could not be made. */
export function isConnectionError(e: unknown, depth = 0): boolean {
  if (!e || typeof e !== 'object' || depth > 4) return false;
  const { code, message, cause, errors } = e as {
    code?: unknown;
    message?: unknown;
    cause?: unknown;
    errors?: unknown;
  };
  if (typeof code === 'string' && (LOST_CODES.has(code) || /^08/.test(code))) return true;
  if (typeof message === 'string' && LOST_MESSAGES.test(message)) return true;
  if (Array.isArray(errors) && errors.some((x) => isConnectionError(x, depth + 1))) return true;
  return isConnectionError(cause, depth + 1);
}

/** Whether a pool's database is reachable, as last seen; logs each change once. */
export class DatabaseStatus {
  private down = false;
  private since = 0;

  constructor(readonly application: string) {}

  get reachable(): boolean {
    return !this.down;
  }

  lost(err: unknown): void {
    const msg = (err as Error)?.message ?? String(err);
    if (this.down) {
      log.debug({ application: this.application, err: msg }, 'PostgreSQL still unreachable');
      return;
    }
    this.down = true;
    this.since = Date.now();
    log.warn(
      { application: this.application, err: msg },
      'PostgreSQL connection lost; retrying with backoff',
    );
  }

  restored(): void {
    if (!this.down) return;
    this.down = false;
    log.info(
      { application: this.application, outageMs: Date.now() - this.since },
      'PostgreSQL reachable again',
    );
  }
}

const statuses = new WeakMap<pg.Pool, DatabaseStatus>();

/** The reachability tracker of a pool (pools not made by createPool get one on first use). */
export function databaseStatus(pool: pg.Pool): DatabaseStatus {
  let s = statuses.get(pool);
  if (!s) {
    s = new DatabaseStatus('rods');
    statuses.set(pool, s);
  }
  return s;
}

export function createPool(
  opts: {
    connectionString?: string;
    max?: number;
    application?: string;
    limits?: Partial<SessionLimits>;
  } = {},
): pg.Pool {
  const application = opts.application ?? 'rods';
  const pool = new pg.Pool({
    connectionString: opts.connectionString ?? loadEndpoints().databaseUrl,
    max: opts.max ?? 10,
    application_name: application,
    connectionTimeoutMillis: 10_000,
    ...sessionConfig(sessionLimits(opts.limits)),
  });
  const status = new DatabaseStatus(application);
  statuses.set(pool, status);
  // An idle client died: the pool has already dropped it and connects anew on demand.
  pool.on('error', (err) => status.lost(err));
  pool.on('connect', (client) => {
    // A checked-out client's loss also rejects its query in flight (or is seen by its holder);
    // this listener only keeps the event from ending the process.
    client.on('error', (err) => log.debug({ application, err: err.message }, 'pooled connection lost'));
    status.restored();
  });
  return pool;
}

/** A dedicated client (with an error handler) for short-lived work: migrations, probes. */
export function createClient(config: pg.ClientConfig & { application?: string } = {}): pg.Client {
  const { application = 'rods', ...rest } = config;
  const client = new pg.Client({
    connectionString: rest.host ? undefined : loadEndpoints().databaseUrl,
    connectionTimeoutMillis: 10_000,
    application_name: application,
    // Migrations and probes: no statement timeout (a migration may rewrite a big table).
    ...sessionConfig(sessionLimits({ statementTimeoutMs: 0 })),
    ...rest,
  });
  client.on('error', (err) => log.warn({ application, err: err.message }, 'PostgreSQL connection lost'));
  return client;
}

/** Backoff before retry `attempt` (0-based): 200 ms doubling up to maxMs, with jitter. */
export function backoffMs(attempt: number, maxMs = 5000): number {
  const base = Math.min(maxMs, 200 * 2 ** Math.min(attempt, 10));
  return Math.round(base * (0.75 + Math.random() * 0.5));
}

/**
 * Runs fn, and again with backoff for as long as it fails on a lost connection (other errors
 * are thrown at once). Stops retrying once `signal` aborts or `shouldStop` says so.
 */
export async function retryOnConnectionLoss<T>(
  pool: pg.Pool,
  fn: () => Promise<T>,
  opts: { signal?: AbortSignal; shouldStop?: () => boolean; maxDelayMs?: number } = {},
): Promise<T> {
  const status = databaseStatus(pool);
  for (let attempt = 0; ; attempt++) {
    try {
      const out = await fn();
      status.restored();
      return out;
    } catch (e) {
      if (!isConnectionError(e) || opts.signal?.aborted || opts.shouldStop?.()) throw e;
      status.lost(e);
      await sleep(backoffMs(attempt, opts.maxDelayMs), undefined, { signal: opts.signal }).catch(() => {});
      if (opts.signal?.aborted) throw e;
    }
  }
}

/** A readiness probe: `select 1` within timeoutMs; updates the pool's reachability. */
export async function ping(pool: pg.Pool, timeoutMs = 2000): Promise<boolean> {
  const status = databaseStatus(pool);
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      pool.query('select 1'),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error('timeout exceeded when trying to connect')), timeoutMs);
      }),
    ]);
    status.restored();
    return true;
  } catch (e) {
    if (isConnectionError(e)) status.lost(e);
    return false;
  } finally {
    clearTimeout(timer);
  }
}

/** Runs fn in a transaction on one pooled connection; rolls back on any error. */
export async function inTransaction<T>(pool: pg.Pool, fn: (c: pg.PoolClient) => Promise<T>): Promise<T> {
  const c = await pool.connect();
  let broken: Error | undefined;
  try {
    await c.query('begin');
    const out = await fn(c);
    await c.query('commit');
    return out;
  } catch (e) {
    await c.query('rollback').catch((r: Error) => {
      broken = r;
    });
    throw e;
  } finally {
    // A connection that cannot even roll back is destroyed instead of returned to the pool.
    c.release(broken);
  }
}

/**
 * Runs fn on one connection inside a read-only repeatable-read transaction (one snapshot for all
 * its reads, as an export needs), rolled back at the end.
 */
export async function inSnapshot<T>(pool: pg.Pool, fn: (c: pg.PoolClient) => Promise<T>): Promise<T> {
  const c = await pool.connect();
  try {
    await c.query('begin isolation level repeatable read read only');
    try {
      return await fn(c);
    } finally {
      await c.query('rollback').catch(() => {});
    }
  } finally {
    c.release();
  }
}

/** A count per campaign (and per `key`, a band or status, where the count is split), for gauges. */
export interface CampaignCount {
  campaign_id: string;
  k: string | null;
  n: string | number;
}

/** Runs a `select campaign_id, k, n` over the campaigns named by $1 (the owners' gauge reads). */
export async function countsOf(
  db: pg.Pool,
  sql: string,
  campaignIds: readonly string[],
): Promise<CampaignCount[]> {
  return (await db.query<CampaignCount>(sql, [campaignIds])).rows;
}
