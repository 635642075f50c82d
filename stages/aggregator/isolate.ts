// A batch whose transaction fails for a reason of its own (not a lost connection, not a Kafka
// outage). First the failure is narrowed to campaigns: each campaign's part of the batch is
// probed (a transaction that runs the work and rolls back), and the campaigns whose part fails
// are parked (platform/store/aggregator/park.ts) in the transaction that commits the rest with the partition's
// next offset. So a burst of one campaign's failing records costs the others one probe per
// campaign of the batch. Parked records are then drained, one campaign in offset order: a drain
// that fails is searched for its failing records with probes, split in halves (a part whose
// halves both fail is dense with failures: its records are probed one by one, a few side by
// side). A record that fails alone, and has failed `maxAttempts` times counting every failing
// part it was in (the count survives a restart: aggregator_record_failures), is dead-lettered
// with the error text (code processing-failed) in the transaction that applies the rest. When
// the search finds nothing (the failure needs records together), the records are applied one at
// a time, each failure tried again with backoff. Exactly-once holds as for a batch: every
// record commits with the row that says it was applied, parked or dead-lettered.
import { setTimeout as sleep } from 'node:timers/promises';
import type pino from 'pino';
import { addRecordFailures, clearRecordFailures } from '../../platform/store/aggregator/failures.js';
import { backoffMs, databaseStatus, isConnectionError } from '../../platform/store/db.js';
import {
  BATCH_PHASES,
  type BatchDeps,
  type BatchOptions,
  type BatchResult,
  processBatch,
  type RewardRecord,
} from './batch.js';
import { decodeBatch } from './decode.js';
import type { StepRef } from './step-progress.js';

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
  /** Called before each record is applied (the aggregator marks it alone: platform/store/aggregator/suspects.ts). */
  beforeRecord?: (offset: string) => Promise<void>;
  /** A record that killed a process on its own: dead-lettered as reader-crashed, not applied. */
  crashedAlone?: { offset: string; reason: string };
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
  parked: 0,
});

/** Results of parts of a batch applied one after another, added up. */
export class ResultSum {
  private readonly sum = emptyResult();
  private readonly steps = new Map<string, StepRef>();

  add(r: BatchResult): void {
    const sum = this.sum;
    sum.applied += r.applied;
    sum.duplicates += r.duplicates;
    sum.rejected += r.rejected;
    sum.skipped += r.skipped;
    sum.events += r.events;
    sum.parked += r.parked;
    for (const p of BATCH_PHASES) sum.phases[p] += r.phases[p];
    sum.nextOffset = r.nextOffset ?? sum.nextOffset;
    for (const s of r.steps) this.steps.set(`${s.campaignId}\u0000${s.step}`, s);
  }

  result(): BatchResult {
    return { ...this.sum, steps: [...this.steps.values()] };
  }
}

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
  batchOpts: Pick<BatchOptions, 'drain'> = {},
): Promise<BatchResult | null> {
  const sum = new ResultSum();
  const add = (r: BatchResult) => sum.add(r);
  const deadLetter = (record: RewardRecord, why: { code: string; reason: string }) =>
    deadLetterFailed(deps, ctx, topic, partition, record, why, batchOpts);
  for (const record of records) {
    if (ctx.crashedAlone?.offset === record.offset) {
      const r = await deadLetter(record, { code: 'reader-crashed', reason: ctx.crashedAlone.reason });
      if (!r) return null;
      add(r);
      continue;
    }
    let failures = 0; // transient ones, for the backoff only
    for (;;) {
      if (ctx.abandoned()) return null;
      try {
        if (ctx.beforeRecord) await ctx.beforeRecord(record.offset);
        add(await processBatch(deps, topic, partition, [record], batchOpts));
        await clearRecordFailures(deps.pool, { groupId: deps.groupId, topic, partition }, [record.offset]);
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
          const r = await deadLetter(record, {
            code: 'processing-failed',
            reason: `failed ${attempts} times at offset ${record.offset}: ${error}`,
          });
          if (!r) return null;
          add(r);
          break;
        }
        await sleep(backoffMs(attempts));
        await ctx.heartbeat();
      }
    }
  }
  return sum.result();
}

/** Probes of single records run side by side (each holds a connection while it runs). */
const PROBE_LANES = 3;

/** A failing record found alone: its failures so far (every failing part it was in) and the error. */
interface Culprit {
  failures: number;
  error: string;
}

/** The campaign a record names, when it decodes (an undecodable one is dead-lettered by the batch). */
function campaignOfRecord(deps: BatchDeps, topic: string, partition: number, r: RewardRecord): string {
  const d = decodeBatch([r], { topic, partition, registry: deps.registry });
  return d.groups[0]?.campaignId ?? d.closings[0]?.campaignId ?? '';
}

/**
 * Applies records whose transaction failed (see the top of this file): a batch parks the
 * campaigns whose part fails; a drain (`drain`) is searched for its failing records, which are
 * dead-lettered with the rest applied. Null when abandoned.
 */
export async function applyIsolating(
  deps: BatchDeps,
  ctx: IsolateContext,
  topic: string,
  partition: number,
  records: readonly RewardRecord[],
  firstError: unknown,
  batchOpts: Pick<BatchOptions, 'drain'> = {},
): Promise<BatchResult | null> {
  if (!batchOpts.drain) {
    const parked = await parkFailingCampaigns(deps, ctx, { topic, partition, records, firstError });
    if (parked !== 'search') return parked;
  }
  const excluded = new Map<string, { code: string; reason: string }>();
  const failures = new Map<string, number>();
  /** Failures already added to the stored counts. */
  const stored = new Map<string, number>();
  let error = firstError;
  for (let round = 0; round < 5; round++) {
    // The failed commit is each of its records' first failure in this round.
    for (const r of records)
      if (!excluded.has(r.offset)) failures.set(r.offset, (failures.get(r.offset) ?? 0) + 1);
    const found = await findCulprits(
      deps,
      ctx,
      topic,
      partition,
      records.filter((r) => !excluded.has(r.offset)),
      failures,
      batchOpts,
    );
    if (found === null) return null;
    if (found.size === 0) break;
    const added = new Map(
      [...found].map(([o, c]) => [o, { ...c, failures: c.failures - (stored.get(o) ?? 0) }]),
    );
    const counted = await untilDone(deps, ctx, () => addFailures(deps, topic, partition, added));
    if (counted === null) return null;
    for (const [o, c] of found) {
      stored.set(o, c.failures);
      const attempts = counted.get(o) ?? c.failures;
      excluded.set(o, {
        code: 'processing-failed',
        reason: `failed ${attempts} times at offset ${o} (alone and in the parts of its batch it was in): ${c.error}`,
      });
    }
    ctx.log.warn({ topic, partition, failing: found.size, deadLettered: excluded.size }, 'records failed');
    const committed = await commitOrError(deps, ctx, () =>
      processBatch(deps, topic, partition, records, { ...batchOpts, excluded }),
    );
    if (committed === null) return null;
    if ('result' in committed) {
      await clearRecordFailures(
        deps.pool,
        { groupId: deps.groupId, topic, partition },
        records.map((x) => x.offset),
      );
      return committed.result;
    }
    error = committed.error;
  }
  ctx.log.warn(
    { partition, records: records.length, err: (error as Error)?.message },
    'no record fails alone; applying the records one at a time',
  );
  return applyOneByOne(deps, ctx, topic, partition, records, batchOpts);
}

/**
 * Runs a commit until it is done or fails for a reason of its own (transient failures are
 * waited out). Null when abandoned.
 */
async function commitOrError(
  deps: BatchDeps,
  ctx: IsolateContext,
  commit: () => Promise<BatchResult>,
): Promise<{ result: BatchResult } | { error: unknown } | null> {
  for (let transient = 0; ; transient++) {
    if (ctx.abandoned()) return null;
    try {
      const result = await commit();
      databaseStatus(deps.pool).restored();
      return { result };
    } catch (e) {
      if (!isTransient(e)) return { error: e };
      if (isConnectionError(e)) databaseStatus(deps.pool).lost(e);
      await sleep(backoffMs(transient));
      await ctx.heartbeat();
    }
  }
}

/**
 * A failed batch, split by campaign: the campaigns whose part fails alone (or the batch's only
 * campaign) are parked and the rest committed. 'search' when that cannot explain the failure.
 */
async function parkFailingCampaigns(
  deps: BatchDeps,
  ctx: IsolateContext,
  failed: { topic: string; partition: number; records: readonly RewardRecord[]; firstError: unknown },
): Promise<BatchResult | null | 'search'> {
  const { topic, partition, records, firstError } = failed;
  const byCampaign = new Map<string, RewardRecord[]>();
  for (const r of records) {
    const c = campaignOfRecord(deps, topic, partition, r);
    byCampaign.set(c, [...(byCampaign.get(c) ?? []), r]);
  }
  const message = (e: unknown) => (e as Error)?.message ?? String(e);
  const failing = new Map<string, string>();
  if (byCampaign.size === 1) {
    const only = [...byCampaign.keys()][0]!;
    if (only === '') return 'search';
    failing.set(only, message(firstError));
  } else {
    for (const [c, part] of byCampaign) {
      const probed = await commitOrError(deps, ctx, () =>
        processBatch(deps, topic, partition, part, { probe: true }),
      );
      if (probed === null) return null;
      if ('error' in probed) {
        // Records that name no campaign are dead-lettered by decoding: they cannot be the fault.
        if (c === '') return 'search';
        failing.set(c, message(probed.error));
      }
    }
  }
  if (failing.size === 0) return 'search';
  const park = new Map([...failing].map(([c, e]) => [c, `its records failed to fold: ${e}`]));
  ctx.log.warn(
    { topic, partition, campaigns: [...failing.keys()] },
    'parking the campaigns whose records fail',
  );
  const committed = await commitOrError(deps, ctx, () =>
    processBatch(deps, topic, partition, records, { park }),
  );
  if (committed === null) return null;
  return 'result' in committed ? committed.result : 'search';
}

/**
 * The records of `records` that fail alone, each with its failures counted in `failures` (one per
 * failing probe it was in). Null when abandoned.
 */
async function findCulprits(
  deps: BatchDeps,
  ctx: IsolateContext,
  topic: string,
  partition: number,
  records: readonly RewardRecord[],
  failures: Map<string, number>,
  batchOpts: Pick<BatchOptions, 'drain'>,
): Promise<Map<string, Culprit> | null> {
  const found = new Map<string, Culprit>();
  let probes = 0;
  /** Does the part apply? Counts a failure for each of its records when it does not. */
  const probe = async (part: readonly RewardRecord[]): Promise<string | null> => {
    for (let transient = 0; ; transient++) {
      if (ctx.abandoned()) throw abandon;
      if (++probes % 50 === 0) await ctx.heartbeat();
      try {
        await processBatch(deps, topic, partition, part, { ...batchOpts, probe: true });
        return null;
      } catch (e) {
        if (isTransient(e)) {
          if (isConnectionError(e)) databaseStatus(deps.pool).lost(e);
          await sleep(backoffMs(transient));
          await ctx.heartbeat();
          continue;
        }
        for (const r of part) failures.set(r.offset, (failures.get(r.offset) ?? 0) + 1);
        return (e as Error)?.message ?? String(e);
      }
    }
  };
  const alone = async (r: RewardRecord): Promise<void> => {
    // Failing alone confirms it; failing again until maxAttempts rules out a passing fault.
    let err = await probe([r]);
    while (err !== null) {
      if ((failures.get(r.offset) ?? 0) >= ctx.maxAttempts) {
        found.set(r.offset, { failures: failures.get(r.offset)!, error: err });
        return;
      }
      err = await probe([r]);
    }
  };
  /** `part` failed as a whole: find its failing records. */
  const search = async (part: readonly RewardRecord[]): Promise<void> => {
    if (part.length === 1) return alone(part[0]!);
    const byCampaign = new Map<string, RewardRecord[]>();
    for (const r of part) {
      const c = campaignOfRecord(deps, topic, partition, r);
      const list = byCampaign.get(c) ?? [];
      list.push(r);
      byCampaign.set(c, list);
    }
    const parts =
      byCampaign.size > 1
        ? [...byCampaign.values()]
        : [part.slice(0, part.length >> 1), part.slice(part.length >> 1)];
    const failed: RewardRecord[][] = [];
    for (const p of parts) if ((await probe(p)) !== null) failed.push(p);
    // Both halves fail: failures are dense here; one probe a record is the cheapest search,
    // a few side by side (a probe holds no lock: it rolls back).
    if (byCampaign.size === 1 && failed.length === 2) {
      let next = 0;
      const lane = async () => {
        while (next < part.length) await alone(part[next++]!);
      };
      await Promise.all(Array.from({ length: PROBE_LANES }, lane));
      return;
    }
    for (const p of failed) await search(p);
  };
  const abandon = new Error('abandoned');
  try {
    await search(records);
  } catch (e) {
    if (e === abandon) return null;
    throw e;
  }
  return found;
}

/** Adds the failures found to the stored counts (one statement); returns the totals. */
async function addFailures(
  deps: BatchDeps,
  topic: string,
  partition: number,
  found: ReadonlyMap<string, Culprit>,
): Promise<Map<string, number>> {
  return addRecordFailures(
    deps.pool,
    { groupId: deps.groupId, topic, partition },
    [...found].map(([offset, c]) => ({ offset, failures: c.failures, error: c.error })),
  );
}

/** Retries `fn` while the failure is transient (or until abandoned: null). */
async function untilDone<T>(
  deps: BatchDeps,
  ctx: Pick<IsolateContext, 'abandoned' | 'heartbeat' | 'log'>,
  fn: () => Promise<T>,
): Promise<T | null> {
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
    const totals = await addRecordFailures(deps.pool, { groupId: deps.groupId, topic, partition }, [
      { offset, failures: 1, error },
    ]);
    return totals.get(offset)!;
  });
}

/**
 * Dead-letters the record and stores the offset after it (or takes it out of the park), in one
 * transaction. A group of a registered campaign counts as rejected for its step, so the step can
 * still close.
 */
export async function deadLetterFailed(
  deps: BatchDeps,
  ctx: Pick<IsolateContext, 'abandoned' | 'heartbeat' | 'log'>,
  topic: string,
  partition: number,
  record: RewardRecord,
  letter: { code: string; reason: string },
  batchOpts: Pick<BatchOptions, 'drain'> = {},
): Promise<BatchResult | null> {
  const r = await untilDone(deps, ctx, () =>
    processBatch(deps, topic, partition, [record], {
      ...batchOpts,
      excluded: new Map([[record.offset, letter]]),
    }),
  );
  if (r) await clearRecordFailures(deps.pool, { groupId: deps.groupId, topic, partition }, [record.offset]);
  return r;
}
