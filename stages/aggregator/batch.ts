// One consumed batch (one partition) applied exactly once: decode, skip what was applied before,
// fold into the task statistics, and commit state + emitted events + the partition's next
// offset in one PostgreSQL transaction.
//
// Why a group never counts twice:
// - the partition's next offset lives in aggregator_offsets and is read under a per-partition
//   advisory lock: a record below it was applied already (a redelivery after a crash or a
//   rebalance) and is skipped, and two members briefly owning one partition serialise here;
// - every applied group's event id joins its task's dedupe window (domain/dedupe.ts, stored
//   in the task's row in the same transaction), so a duplicate produced later by a retrying
//   producer (another offset, same id, same task) is skipped too.
// Nothing is applied or emitted unless the whole transaction commits.
import type pg from 'pg';
import { DEFAULT_DEDUPE_WINDOW } from '../../domain/dedupe.js';
import type { SchemaRegistry } from '../../platform/codec/registry.js';
import {
  lockPartition,
  recordRefusals,
  storedNextOffset,
  storeNextOffset,
} from '../../platform/store/aggregator/offsets.js';
import {
  type ParkedRecord,
  parkedCampaigns,
  parkRecords,
  stillParked,
  unpark,
} from '../../platform/store/aggregator/park.js';
import { inTransaction } from '../../platform/store/db.js';
import { StreamOrderError } from '../../platform/store/events/event-store.js';
import { everInPool } from '../../platform/store/pool/members.js';
import { declareSteps, recordStepProgress } from '../../platform/store/steps/progress.js';
import { loadTasks, taskKey, upsertStats } from '../../platform/store/task-stats/state.js';
import type { CampaignCache } from './campaign-cache.js';
import { type DeadLetterNote, decodeBatch, type RewardRecord } from './decode.js';
import { appendStatsEvents, statsEvents } from './events.js';
import { foldGroups } from './fold.js';
import { movedSteps, type StepRef } from './step-progress.js';
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
  /** Records set aside behind their campaign's failing ones (platform/store/aggregator/park.ts). */
  parked: number;
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
  /** The tasks this process committed last (stages/aggregator/task-cache.ts); without it every task is read in full. */
  tasks?: TaskStateCache;
  now?: () => number;
}

export interface BatchOptions {
  /**
   * Records found unable to be folded (stages/aggregator/isolate.ts), by offset: dead-lettered with
   * this code and reason in the batch's transaction instead of applied; a group of a registered
   * campaign counts as rejected for its step, so the step can still close.
   */
  excluded?: ReadonlyMap<string, { code: string; reason: string }>;
  /** Runs the whole transaction and rolls it back: does this batch apply? Nothing is kept or sent. */
  probe?: boolean;
  /**
   * Campaigns whose records in this batch are set aside (platform/store/aggregator/park.ts), with the reason:
   * their part of the batch failed. Campaigns with records parked here already are parked too.
   */
  park?: ReadonlyMap<string, string>;
  /**
   * The records are parked ones of one campaign (platform/store/aggregator/park.ts): applied if still parked,
   * then taken out of the park; the partition's next offset is not touched.
   */
  drain?: boolean;
}

/** A probe's transaction is rolled back by throwing this, carrying what it would have done. */
class ProbeRollback extends Error {
  constructor(readonly result: BatchResult) {
    super('probe rolled back');
  }
}

/** Applies one batch of one partition. Retries itself on a StreamOrderError (a benign race). */
export async function processBatch(
  deps: BatchDeps,
  topic: string,
  partition: number,
  records: readonly RewardRecord[],
  opts: BatchOptions = {},
): Promise<BatchResult> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await processOnce(deps, topic, partition, records, opts);
    } catch (e) {
      if (e instanceof ProbeRollback) return e.result;
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
  opts: BatchOptions,
): Promise<BatchResult> {
  const clock = phaseClock();
  // Decoding happens outside the transaction (pure CPU).
  const decoded = decodeBatch(records, { topic, partition, registry: deps.registry });
  const excluded = opts.excluded ?? new Map();
  const kept = (r: { offset: string }) => !excluded.has(r.offset);
  const excludedGroups = decoded.groups.filter((g) => !kept(g));
  decoded.groups = decoded.groups.filter(kept);
  decoded.closings = decoded.closings.filter(kept);
  decoded.dead = decoded.dead.filter(kept);
  clock.mark('decode');
  const result = await inTransaction(deps.pool, async (tx) => {
    // A probe writes nothing that stays: it need not wait for the partition (probes run side by side).
    if (!opts.probe) await lockPartition(tx, deps.groupId, topic, partition);
    // The cached campaigns, re-checked against their config versions in this transaction: the
    // configs folded with are current at the commit (a reconfiguration waits for this batch).
    const campaigns = await deps.campaigns.current(tx, [
      ...decoded.groups.map((g) => g.campaignId),
      ...excludedGroups.map((g) => g.campaignId),
      ...decoded.closings.map((c) => c.campaignId),
    ]);
    // A batch applies what is above the stored next offset; a drain what is still parked.
    const from = opts.drain ? 0 : await storedNextOffset(tx, deps.groupId, topic, partition);
    const inPark = opts.drain
      ? await stillParked(
          tx,
          deps.groupId,
          topic,
          partition,
          records.map((r) => r.offset),
        )
      : undefined;
    const fresh = (r: { offset: string }) => (inPark ? inPark.has(r.offset) : Number(r.offset) >= from);
    let groups = decoded.groups.filter(fresh);
    let closings = decoded.closings.filter(fresh);
    // Campaigns set aside on this partition: their records join the park, in order.
    const parking = new Map<string, string>();
    if (!opts.drain) {
      for (const c of await parkedCampaigns(tx, deps.groupId, topic, partition))
        parking.set(c, 'behind records of its campaign parked on this partition');
      for (const [c, why] of opts.park ?? []) parking.set(c, why);
    }
    const toPark: ParkedRecord[] = [];
    if (parking.size > 0) {
      const byOffset = new Map(records.map((r) => [r.offset, r]));
      for (const x of [...groups, ...closings])
        if (parking.has(x.campaignId))
          toPark.push({
            ...byOffset.get(x.offset)!,
            campaignId: x.campaignId,
            reason: parking.get(x.campaignId)!,
          });
      groups = groups.filter((g) => !parking.has(g.campaignId));
      closings = closings.filter((c) => !parking.has(c.campaignId));
      toPark.sort((a, b) => Number(a.offset) - Number(b.offset));
      await parkRecords(tx, deps.groupId, topic, partition, toPark);
    }
    clock.mark('lock');

    const stored = groups.length > 0 ? await loadTasks(tx, groups, deps.tasks) : [];
    // Tasks with no statistics yet, of campaigns that dead-letter unknown tasks: were they ever in the pool?
    const known = new Set(stored.map((t) => taskKey(t.campaignId, t.taskId)));
    const newTasks = groups.filter(
      (g) =>
        !known.has(taskKey(g.campaignId, g.taskId)) &&
        campaigns.get(g.campaignId)?.config.ingestion.unknownTasks === 'dead-letter',
    );
    const members = newTasks.length > 0 ? await everInPool(tx, newTasks) : undefined;
    clock.mark('load');
    const folded = foldGroups({ groups, campaigns, stored, dedupeWindow: deps.dedupeWindow, members });
    for (const g of excludedGroups)
      if (fresh(g) && campaigns.get(g.campaignId)) folded.tallies.rejected(g.campaignId, g.step);
    // A group refused before (the same record delivered again) is not tallied as rejected twice.
    for (const r of await recordRefusals(tx, folded.refused)) folded.tallies.rejected(r.campaignId, r.step);
    const dead = [
      ...records
        .filter((r) => excluded.has(r.offset) && fresh(r))
        .map((r) => ({ offset: r.offset, ...excluded.get(r.offset)!, key: r.key, value: r.value })),
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
      statsEvents(deps.registry, folded.steps, deps.now ?? Date.now),
    );
    clock.mark('events');
    await upsertStats(tx, folded.touched, deps.dedupeWindow ?? DEFAULT_DEDUPE_WINDOW);
    clock.mark('stats');
    await recordStepProgress(tx, topic, partition, folded.tallies.all());
    await declareSteps(
      tx,
      closings.filter((c) => campaigns.get(c.campaignId)),
    );
    const last = records[records.length - 1];
    const nextOffset = last && !opts.drain ? String(Number(last.offset) + 1) : null;
    if (nextOffset !== null && Number(nextOffset) > from)
      await storeNextOffset(tx, deps.groupId, topic, partition, nextOffset);
    if (inPark) await unpark(tx, deps.groupId, topic, partition, [...inPark]);
    // Dead letters go out before the commit: a crash in between re-sends them with the same ids.
    if (dead.length > 0 && !opts.probe) await deps.deadLetter(dead);
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
      parked: toPark.length,
    };
    if (opts.probe) throw new ProbeRollback(batch);
    return { batch, touched: folded.touched };
  });
  clock.mark('commit');
  deps.tasks?.committed(result.touched);
  return result.batch;
}
