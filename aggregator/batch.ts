// One consumed batch (one partition) applied exactly once: decode, skip what was applied before,
// fold into the task statistics, and commit state + emitted events + the partition's next
// offset in one PostgreSQL transaction.
//
// Why a group never counts twice:
// - the partition's next offset lives in aggregator_offsets and is read under a per-partition
//   advisory lock: a record below it was applied already (a redelivery after a crash or a
//   rebalance) and is skipped, and two members briefly owning one partition serialise here;
// - every applied group's event id joins its task's dedupe window (aggregator/dedupe.ts, stored
//   in the task's row in the same transaction), so a duplicate produced later by a retrying
//   producer (another offset, same id, same task) is skipped too.
// Nothing is applied or emitted unless the whole transaction commits.
import type pg from 'pg';
import type { SchemaRegistry } from '../codec/registry.js';
import { inTransaction } from '../store/db.js';
import { StreamOrderError } from '../store/event-store.js';
import type { CampaignCache } from './campaign-cache.js';
import { type DeadLetterNote, decodeBatch, type RewardRecord } from './decode.js';
import { DEFAULT_DEDUPE_WINDOW } from './dedupe.js';
import { appendStatsEvents, statsEvents } from './events.js';
import { foldGroups } from './fold.js';
import { loadTasks, lockPartition, storedNextOffset, storeNextOffset, upsertStats } from './state-store.js';
import { declareSteps, movedSteps, recordStepProgress, type StepRef } from './step-progress.js';
import type { TaskStateCache } from './task-cache.js';
import { unknownCampaignClosings } from './validate.js';

export type { DeadLetterNote, RewardRecord } from './decode.js';

export interface BatchResult {
  applied: number;
  duplicates: number;
  rejected: number;
  /** Records below the stored next offset (already applied by an earlier delivery). */
  skipped: number;
  /** Steps whose progress moved (candidates for closing). */
  steps: StepRef[];
  nextOffset: string | null;
  events: number;
  /** Seconds spent in each phase of the applied attempt (rods_aggregator_batch_phase_seconds_total). */
  phases: Record<BatchPhase, number>;
}

/** The phases of a batch, in order: where its time goes (dev/bench/README.md reads them). */
export const BATCH_PHASES = [
  'decode',
  'lock',
  'load',
  'fold',
  'events',
  'stats',
  'progress',
  'commit',
] as const;
export type BatchPhase = (typeof BATCH_PHASES)[number];

/** Times consecutive phases: each mark() charges the time since the previous one to a phase. */
function phaseClock(): { mark: (p: BatchPhase) => void; phases: Record<BatchPhase, number> } {
  const phases = Object.fromEntries(BATCH_PHASES.map((p) => [p, 0])) as Record<BatchPhase, number>;
  let last = performance.now();
  return {
    phases,
    mark(p) {
      const now = performance.now();
      phases[p] += (now - last) / 1000;
      last = now;
    },
  };
}

export interface BatchDeps {
  pool: pg.Pool;
  registry: SchemaRegistry;
  campaigns: CampaignCache;
  groupId: string;
  /** Publishes the batch's dead letters; must resolve before the transaction commits. */
  deadLetter: (notes: DeadLetterNote[]) => Promise<void>;
  /** Groups per task whose event ids are remembered for duplicate detection; default 64. */
  dedupeWindow?: number;
  /** The tasks this process committed last (aggregator/task-cache.ts); without it every task is read in full. */
  tasks?: TaskStateCache;
  now?: () => number;
}

/** Applies one batch of one partition. Retries itself on a StreamOrderError (a benign race). */
export async function processBatch(
  deps: BatchDeps,
  topic: string,
  partition: number,
  records: readonly RewardRecord[],
): Promise<BatchResult> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await processOnce(deps, topic, partition, records);
    } catch (e) {
      if (e instanceof StreamOrderError && attempt < 5) continue;
      throw e;
    }
  }
}

async function processOnce(
  deps: BatchDeps,
  topic: string,
  partition: number,
  records: readonly RewardRecord[],
): Promise<BatchResult> {
  const clock = phaseClock();
  // Decoding happens outside the transaction (pure CPU).
  const decoded = decodeBatch(records, { topic, partition, registry: deps.registry });
  clock.mark('decode');
  const result = await inTransaction(deps.pool, async (tx) => {
    await lockPartition(tx, deps.groupId, topic, partition);
    // The cached campaigns, re-checked against their config versions in this transaction: the
    // configs folded with are current at the commit (a reconfiguration waits for this batch).
    const campaigns = await deps.campaigns.current(tx, [
      ...decoded.groups.map((g) => g.campaignId),
      ...decoded.closings.map((c) => c.campaignId),
    ]);
    const from = await storedNextOffset(tx, deps.groupId, topic, partition);
    const fresh = (r: { offset: string }) => Number(r.offset) >= from;
    const groups = decoded.groups.filter(fresh);
    const closings = decoded.closings.filter(fresh);
    clock.mark('lock');

    const stored = groups.length > 0 ? await loadTasks(tx, groups, deps.tasks) : [];
    clock.mark('load');
    const folded = foldGroups({ groups, campaigns, stored, dedupeWindow: deps.dedupeWindow });
    const dead = [
      ...decoded.dead.filter(fresh),
      ...folded.dead,
      ...unknownCampaignClosings(closings, campaigns),
    ].sort((a, b) => Number(a.offset) - Number(b.offset));

    clock.mark('fold');
    // Events first (the store's rule for transactions that also write other rows).
    const events = await appendStatsEvents(
      tx,
      topic,
      partition,
      statsEvents(deps.registry, folded, deps.now ?? Date.now),
    );
    clock.mark('events');
    await upsertStats(tx, folded.touched, deps.dedupeWindow ?? DEFAULT_DEDUPE_WINDOW);
    clock.mark('stats');
    await recordStepProgress(tx, topic, partition, folded.tallies);
    await declareSteps(
      tx,
      closings.filter((c) => campaigns.get(c.campaignId)),
    );
    const last = records[records.length - 1];
    const nextOffset = last ? String(Number(last.offset) + 1) : null;
    if (nextOffset !== null && Number(nextOffset) > from)
      await storeNextOffset(tx, deps.groupId, topic, partition, nextOffset);
    // Dead letters go out before the commit: a crash in between re-sends them with the same ids.
    if (dead.length > 0) await deps.deadLetter(dead);
    clock.mark('progress');
    const batch: BatchResult = {
      applied: folded.applied,
      duplicates: folded.duplicates,
      rejected: dead.length,
      skipped: records.filter((r) => !fresh(r)).length,
      steps: movedSteps(folded.tallies, closings),
      nextOffset,
      events,
      phases: clock.phases,
    };
    return { batch, touched: folded.touched };
  });
  clock.mark('commit');
  deps.tasks?.committed(result.touched);
  return result.batch;
}
