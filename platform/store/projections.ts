// Projections: read models built from the event log. A runner reads a batch of events after the
// projection's checkpoint and applies the batch and the new checkpoint in ONE transaction, so a
// crash never applies an event twice or skips one. Several runners of the same projection may
// run at once (several processes or machines): each batch transaction first takes a
// transaction-scoped advisory lock on the projection's name, then reads the checkpoint, so a
// second runner waits for the first's batch to commit and continues after it.
//
// rebuild() clears the projection's own tables through its reset() hook and replays the log from
// the start in a single transaction: readers of the projection see the old rows until the new
// ones commit, and live runners wait on the lock meanwhile. Deterministic replay (invariant 3)
// means a rebuilt projection equals the live one.
import { setTimeout as sleep } from 'node:timers/promises';
import type pg from 'pg';
import { inTransaction } from './db.js';
import {
  type Cursor,
  compareCursors,
  cursorAt,
  cursorOf,
  type RecordedEvent,
  readLog,
  readPage,
  START,
} from './events/event-store.js';

export interface Projection {
  /** Unique name; also the key of its checkpoint. */
  name: string;
  /** Creates the projection's tables if they do not exist (idempotent). */
  init?(client: pg.PoolClient): Promise<void>;
  /** Applies one event inside the batch transaction. Must be deterministic. */
  apply(client: pg.PoolClient, event: RecordedEvent): Promise<void>;
  /** Empties the projection's own tables (for rebuild). */
  reset?(client: pg.PoolClient): Promise<void>;
}

export interface CatchUpOptions {
  /** Events per transaction; default 500. */
  batchSize?: number;
  /**
   * Keep going (polling every pollMs) until the event at this position (or this cursor) has been
   * applied, even if it is not yet visible to readers. Without it catchUp stops at the first
   * empty batch.
   */
  until?: number | Cursor;
  /** Poll interval while waiting for `until`; default 100 ms. */
  pollMs?: number;
  /** Stops waiting (the promise rejects with the abort reason). */
  signal?: AbortSignal;
}

export interface CatchUpResult {
  /** Events applied by this call. */
  applied: number;
  /** The checkpoint after the call. */
  checkpoint: Cursor;
}

// Advisory lock key space of projections: (LOCK_CLASS, hashtext(name)). Two names with the same
// hash only share a lock, which serialises them and is harmless.
const LOCK_CLASS = 0x726f6473; // 'rods'

async function lockProjection(c: pg.PoolClient, name: string): Promise<void> {
  await c.query('select pg_advisory_xact_lock($1::int, hashtext($2))', [LOCK_CLASS, name]);
}

async function checkpointIn(c: pg.PoolClient, name: string): Promise<Cursor> {
  const { rows } = await c.query<Cursor>(
    `select transaction_id::text as "transactionId", position from projection_checkpoints where name = $1`,
    [name],
  );
  return rows[0] ?? { ...START };
}

async function saveCheckpoint(c: pg.PoolClient, name: string, cp: Cursor): Promise<void> {
  await c.query(
    `insert into projection_checkpoints (name, position, transaction_id, updated_at)
     values ($1, $2, $3::xid8, now())
     on conflict (name) do update
       set position = excluded.position, transaction_id = excluded.transaction_id, updated_at = now()`,
    [name, cp.position, cp.transactionId],
  );
}

/**
 * Moves a projection's checkpoint, e.g. to start a new projection "from now" (headCursor()) when
 * it only cares about future events. It takes the projection's lock, so no batch is in flight.
 */
export async function setCheckpoint(pool: pg.Pool, name: string, cursor: Cursor): Promise<void> {
  await inTransaction(pool, async (c) => {
    await lockProjection(c, name);
    await saveCheckpoint(c, name, cursor);
  });
}

/** The projection's checkpoint (the start when it has none). */
export async function readCheckpoint(db: pg.Pool | pg.PoolClient, name: string): Promise<Cursor> {
  const { rows } = await db.query<Cursor>(
    `select transaction_id::text as "transactionId", position from projection_checkpoints where name = $1`,
    [name],
  );
  return rows[0] ?? { ...START };
}

/** Runs init() and creates the checkpoint row, under the projection's lock. */
export async function initProjection(pool: pg.Pool, p: Projection): Promise<void> {
  await inTransaction(pool, async (c) => {
    await lockProjection(c, p.name);
    await c.query('insert into projection_checkpoints (name) values ($1) on conflict (name) do nothing', [
      p.name,
    ]);
    if (p.init) await p.init(c);
  });
}

/** Applies one batch after the checkpoint in one transaction; returns how many were applied. */
async function applyBatch(pool: pg.Pool, p: Projection, batchSize: number): Promise<CatchUpResult> {
  return inTransaction(pool, async (c) => {
    await lockProjection(c, p.name);
    const from = await checkpointIn(c, p.name);
    // Read before any write of this transaction, so that it has no transaction id of its own
    // that would hide newer commits from the reader.
    const events = await readPage(c, from, batchSize);
    if (events.length === 0) return { applied: 0, checkpoint: from };
    for (const e of events) await p.apply(c, e);
    const to = cursorOf(events[events.length - 1]!);
    await saveCheckpoint(c, p.name, to);
    return { applied: events.length, checkpoint: to };
  });
}

async function untilCursor(pool: pg.Pool, until: number | Cursor | undefined): Promise<Cursor | undefined> {
  if (until === undefined) return undefined;
  if (typeof until !== 'number') return until;
  return cursorAt(pool, until);
}

/** Applies batches until the log is exhausted (or, with `until`, until that event is applied). */
export async function catchUp(
  pool: pg.Pool,
  p: Projection,
  opts: CatchUpOptions = {},
): Promise<CatchUpResult> {
  const batchSize = opts.batchSize ?? 500;
  await initProjection(pool, p);
  const target = await untilCursor(pool, opts.until);
  let applied = 0;
  for (;;) {
    opts.signal?.throwIfAborted();
    const r = await applyBatch(pool, p, batchSize);
    applied += r.applied;
    if (r.applied === batchSize) continue;
    if (!target || compareCursors(r.checkpoint, target) >= 0) return { applied, checkpoint: r.checkpoint };
    await sleep(opts.pollMs ?? 100, undefined, { signal: opts.signal });
  }
}

export interface RunOptions {
  batchSize?: number;
  /** Wait between polls once caught up; default 250 ms. */
  pollMs?: number;
  /** Stops the runner (the promise resolves). */
  signal?: AbortSignal;
}

/** Keeps a projection up to date until the signal aborts. Rejects if apply() throws. */
export async function runProjection(pool: pg.Pool, p: Projection, opts: RunOptions = {}): Promise<void> {
  const batchSize = opts.batchSize ?? 500;
  await initProjection(pool, p);
  while (!opts.signal?.aborted) {
    const r = await applyBatch(pool, p, batchSize);
    if (r.applied === batchSize) continue;
    try {
      await sleep(opts.pollMs ?? 250, undefined, { signal: opts.signal });
    } catch {
      return;
    }
  }
}

export interface RebuildOptions {
  /** Events per page of the rebuild's reader (and per batch of a following catch-up); default 1000. */
  batchSize?: number;
  /** After the rebuild, catch up (polling) until this event is applied; see CatchUpOptions. */
  until?: number | Cursor;
  pollMs?: number;
  signal?: AbortSignal;
}

/**
 * Empties the projection (reset()) and replays the whole log into it in one transaction, then
 * moves its checkpoint. Events whose transactions were still open are left to the next catch-up
 * (or waited for with `until`). Uses two of the pool's connections: one applies, one streams the
 * log (readLog).
 */
export async function rebuild(
  pool: pg.Pool,
  p: Projection,
  opts: RebuildOptions = {},
): Promise<CatchUpResult> {
  if (!p.reset) throw new Error(`projection ${p.name} has no reset() hook and cannot be rebuilt`);
  const reset = p.reset.bind(p);
  const batchSize = opts.batchSize ?? 1000;
  await initProjection(pool, p);
  const first = await inTransaction(pool, async (c) => {
    await lockProjection(c, p.name);
    // reset() gives this transaction an id, so the reads below cannot see past it; that id is
    // newer than every event a live runner had applied, so the rebuild covers at least as much.
    let cursor: Cursor = { ...START };
    let applied = 0;
    await reset(c);
    // The whole history through the bulk reader, on a second connection (this one is busy
    // applying). Its horizon is the same as here: this transaction is still running, so the
    // reader stops below its id too. Another pass picks up what older transactions committed
    // meanwhile, as paging until a short page did.
    for (let more = true; more; ) {
      more = false;
      for await (const events of readLog(pool, { after: cursor, pageSize: batchSize })) {
        for (const e of events) await p.apply(c, e);
        applied += events.length;
        cursor = cursorOf(events[events.length - 1]!);
        more = true;
      }
    }
    await saveCheckpoint(c, p.name, cursor);
    return { applied, checkpoint: cursor };
  });
  if (opts.until === undefined) return first;
  const more = await catchUp(pool, p, {
    batchSize,
    until: opts.until,
    pollMs: opts.pollMs,
    signal: opts.signal,
  });
  return { applied: first.applied + more.applied, checkpoint: more.checkpoint };
}

/** Projections by name: `runner.catchUp('task-stats')`, `runner.rebuild('task-stats')`. */
export function projectionRunner(pool: pg.Pool, projections: Projection[]) {
  const byName = new Map<string, Projection>();
  for (const p of projections) {
    if (byName.has(p.name)) throw new Error(`projection ${p.name} registered twice`);
    byName.set(p.name, p);
  }
  const get = (name: string): Projection => {
    const p = byName.get(name);
    if (!p)
      throw new Error(`unknown projection ${JSON.stringify(name)}; known: ${[...byName.keys()].join(', ')}`);
    return p;
  };
  return {
    names: () => [...byName.keys()],
    catchUp: (name: string, opts?: CatchUpOptions) => catchUp(pool, get(name), opts),
    run: (name: string, opts?: RunOptions) => runProjection(pool, get(name), opts),
    rebuild: (name: string, opts?: RebuildOptions) => rebuild(pool, get(name), opts),
    checkpoint: (name: string) => readCheckpoint(pool, get(name).name),
  };
}
