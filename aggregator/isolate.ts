// A batch whose transaction fails for a reason of its own (not a lost connection, not a Kafka
// outage) is applied again one record at a time, each in its own transaction, so the record at
// fault is found and the records before it are applied. That record is tried again with backoff;
// each failure is counted in aggregator_record_failures (it survives a restart or a move of the
// partition). After `maxAttempts` failures it goes to the dead-letter topic with the error text
// (code processing-failed), the stored next offset passes it in the same transaction, and the
// partition moves on. Exactly-once holds as for a batch: every record commits with its offset.
import { setTimeout as sleep } from 'node:timers/promises';
import type pg from 'pg';
import type pino from 'pino';
import { backoffMs, databaseStatus, inTransaction, isConnectionError } from '../store/db.js';
import { BATCH_PHASES, type BatchDeps, type BatchResult, processBatch, type RewardRecord } from './batch.js';
import { decodeBatch } from './decode.js';
import { lockPartition, storedNextOffset, storeNextOffset } from './state-store.js';
import { recordStepProgress, type StepRef, StepTallies } from './step-progress.js';

/** Default number of failed attempts at one record before it is dead-lettered. */
export const DEFAULT_MAX_RECORD_ATTEMPTS = 3;

/** A dead letter the DLQ did not take (Kafka away): the record is not at fault. */
export class DeadLetterSendError extends Error {
  constructor(cause: unknown) {
    super(`dead letter not sent: ${(cause as Error)?.message ?? String(cause)}`, { cause });
  }
}

// SQLSTATE classes that say nothing about the data: invalid transaction state (25), authorization
// (28), catalog (3D), conflicts (40), schema or privileges (42, e.g. a migration not applied yet),
// resources (53), object state (55), operator intervention (57), system (58), internal (XX).
// They are retried without counting, so a fault of the database never dead-letters good records.
// Data exceptions (22), constraints (23), program limits (54), trigger raises (P0) and errors of
// the code itself count against the record.
const TRANSIENT_SQLSTATE = /^(25|28|3D|40|42|53|55|57|58|XX)[0-9A-Z]{3}$/;

/** True when a failure says nothing about the records: retry the same work later. */
export function isTransient(e: unknown): boolean {
  if (isConnectionError(e) || e instanceof DeadLetterSendError) return true;
  const code = (e as { code?: unknown })?.code;
  return typeof code === 'string' && TRANSIENT_SQLSTATE.test(code);
}

export interface IsolateContext {
  maxAttempts: number;
  log: pino.Logger;
  /** Keeps the group membership alive (throws when the group rebalances). */
  heartbeat: () => Promise<void>;
  /** The consumer is stopping or the batch became stale: give up (it comes again). */
  abandoned: () => boolean;
}

const emptyResult = (): BatchResult => ({
  applied: 0,
  duplicates: 0,
  rejected: 0,
  skipped: 0,
  steps: [],
  nextOffset: null,
  events: 0,
  phases: Object.fromEntries(BATCH_PHASES.map((p) => [p, 0])) as BatchResult['phases'],
});

/**
 * Applies the records one by one (see the top of this file). Returns the sum of their results,
 * or null when abandoned (nothing after the last committed record is applied; it comes again).
 */
export async function applyOneByOne(
  deps: BatchDeps,
  ctx: IsolateContext,
  topic: string,
  partition: number,
  records: readonly RewardRecord[],
): Promise<BatchResult | null> {
  const sum = emptyResult();
  const steps = new Map<string, StepRef>();
  const add = (r: BatchResult) => {
    sum.applied += r.applied;
    sum.duplicates += r.duplicates;
    sum.rejected += r.rejected;
    sum.skipped += r.skipped;
    sum.events += r.events;
    for (const p of BATCH_PHASES) sum.phases[p] += r.phases[p];
    sum.nextOffset = r.nextOffset ?? sum.nextOffset;
    for (const s of r.steps) steps.set(`${s.campaignId}\u0000${s.step}`, s);
  };
  for (const record of records) {
    let failures = 0; // transient ones, for the backoff only
    for (;;) {
      if (ctx.abandoned()) return null;
      try {
        add(await processBatch(deps, topic, partition, [record]));
        await clearFailures(deps.pool, deps.groupId, topic, partition, record.offset);
        databaseStatus(deps.pool).restored();
        break;
      } catch (e) {
        if (isTransient(e)) {
          if (isConnectionError(e)) databaseStatus(deps.pool).lost(e);
          else ctx.log.warn({ partition, offset: record.offset, err: (e as Error).message }, 'retrying');
          await sleep(backoffMs(failures++));
          await ctx.heartbeat();
          continue;
        }
        const error = (e as Error)?.message ?? String(e);
        const attempts = await countFailure(deps, ctx, topic, partition, record.offset, error);
        if (attempts === null) return null;
        ctx.log.warn({ topic, partition, offset: record.offset, attempts, err: error }, 'record failed');
        if (attempts >= ctx.maxAttempts) {
          const r = await deadLetterFailed(deps, ctx, topic, partition, record, attempts, error);
          if (!r) return null;
          add(r);
          break;
        }
        await sleep(backoffMs(attempts));
        await ctx.heartbeat();
      }
    }
  }
  sum.steps = [...steps.values()];
  return sum;
}

/** Retries `fn` while the failure is transient (or until abandoned: null). */
async function untilDone<T>(deps: BatchDeps, ctx: IsolateContext, fn: () => Promise<T>): Promise<T | null> {
  for (let attempt = 0; ; attempt++) {
    if (ctx.abandoned()) return null;
    try {
      return await fn();
    } catch (e) {
      if (isConnectionError(e)) databaseStatus(deps.pool).lost(e);
      else ctx.log.warn({ err: (e as Error).message }, 'retrying');
      await sleep(backoffMs(attempt));
      await ctx.heartbeat();
    }
  }
}

/** Adds one failed attempt at the record; returns the attempts so far. */
function countFailure(
  deps: BatchDeps,
  ctx: IsolateContext,
  topic: string,
  partition: number,
  offset: string,
  error: string,
): Promise<number | null> {
  return untilDone(deps, ctx, async () => {
    const { rows } = await deps.pool.query<{ attempts: number }>(
      `insert into aggregator_record_failures (group_id, topic, partition, "offset", attempts, last_error)
       values ($1, $2, $3, $4, 1, $5)
       on conflict (group_id, topic, partition, "offset") do update
         set attempts = aggregator_record_failures.attempts + 1, last_error = excluded.last_error, updated_at = now()
       returning attempts`,
      [deps.groupId, topic, partition, offset, storableError(error)],
    );
    return rows[0]!.attempts;
  });
}

async function clearFailures(
  pool: pg.Pool,
  groupId: string,
  topic: string,
  partition: number,
  offset: string,
): Promise<void> {
  await pool
    .query(
      'delete from aggregator_record_failures where group_id = $1 and topic = $2 and partition = $3 and "offset" <= $4',
      [groupId, topic, partition, offset],
    )
    .catch(() => {}); // a leftover row only starts a later count higher
}

/** An error text PostgreSQL can store (no U+0000, bounded). */
function storableError(error: string): string {
  return error.replaceAll('\u0000', '\\u0000').slice(0, 4000);
}

/**
 * Dead-letters the record and stores the offset after it, in one transaction. A group of a
 * registered campaign counts as rejected for its step, so the step can still close.
 */
async function deadLetterFailed(
  deps: BatchDeps,
  ctx: IsolateContext,
  topic: string,
  partition: number,
  record: RewardRecord,
  attempts: number,
  error: string,
): Promise<BatchResult | null> {
  return untilDone(deps, ctx, () =>
    inTransaction(deps.pool, async (tx) => {
      await lockPartition(tx, deps.groupId, topic, partition);
      const r = emptyResult();
      const from = await storedNextOffset(tx, deps.groupId, topic, partition);
      // Another member passed it meanwhile (a rebalance).
      if (Number(record.offset) < from) return { ...r, skipped: 1 };
      const group = decodeBatch([record], { topic, partition, registry: deps.registry }).groups[0];
      if (group && (await deps.campaigns.current(tx, [group.campaignId])).get(group.campaignId)) {
        const tallies = new StepTallies();
        tallies.rejected(group.campaignId, group.step);
        await recordStepProgress(tx, topic, partition, tallies);
        r.steps = [{ campaignId: group.campaignId, step: group.step }];
      }
      r.nextOffset = String(Number(record.offset) + 1);
      await storeNextOffset(tx, deps.groupId, topic, partition, r.nextOffset);
      await tx.query(
        'delete from aggregator_record_failures where group_id = $1 and topic = $2 and partition = $3 and "offset" = $4',
        [deps.groupId, topic, partition, record.offset],
      );
      await deps.deadLetter([
        {
          offset: record.offset,
          code: 'processing-failed',
          reason: `failed ${attempts} times at offset ${record.offset}: ${error}`,
          key: record.key,
          value: record.value,
        },
      ]);
      r.rejected = 1;
      return r;
    }),
  );
}
