// A campaign's recorded reward groups, read back from the reward topic, and folded with the same
// rules as the aggregator (dedupe by event id, reward validation, stale steps) and the same pure
// statistics code. Shared by `rods replay --source kafka` and `rods whatif`.

import type { DetectorConfig } from '../../domain/band.js';
import type { DedupeWindows } from '../../domain/dedupe.js';
import { eventIdProblem, unstorableProblem } from '../../domain/record-checks.js';
import { checkGroup, type RewardLimits } from '../../domain/reward-group.js';
import { applyGroup, type TaskState } from '../../domain/task-stats.js';
import { decode } from '../../platform/codec/registry.js';
import { type ConsumedRecord, openKafka, readToEnd, withAdmin } from '../../platform/kafka/client.js';
import { DLQ_TOPIC } from '../../platform/kafka/dlq.js';

export interface RecordedGroup {
  eventId: string;
  taskId: string;
  step: number;
  rewards: number[];
}

/**
 * Hands every RolloutGroupScored of the campaign on the topic to `onBatch`, one fetched batch at
 * a time, in each partition's order (a task's groups in production order). `skip` holds the
 * records ("partition:offset") the aggregator dead-lettered although they decode (see
 * processingFailed): they never counted live either.
 */
export async function forEachCampaignGroup(
  topic: string,
  campaignId: string,
  onBatch: (groups: RecordedGroup[]) => void,
  skip: ReadonlySet<string> = new Set(),
): Promise<void> {
  const read = { client: openKafka({ clientId: 'rods-replay' }), maxBytesPerPartition: 8 << 20 };
  await readToEnd(
    topic,
    (records, partition) => {
      onBatch(campaignGroupsOf(records, partition, campaignId, skip));
    },
    read,
  );
}

/** The campaign's groups among a partition's records, as the aggregator would read them. */
function campaignGroupsOf(
  records: readonly ConsumedRecord[],
  partition: number,
  campaignId: string,
  skip: ReadonlySet<string>,
): RecordedGroup[] {
  const out: RecordedGroup[] = [];
  for (const m of records) {
    if (skip.size > 0 && skip.has(`${partition}:${m.offset}`)) continue;
    try {
      const d = decode(m.value!);
      if (
        d.name === 'RolloutGroupScored' &&
        d.payload.campaignId === campaignId &&
        // What the aggregator dead-letters at decode: ids it cannot store or dedupe by.
        !eventIdProblem(d.payload.eventId) &&
        !unstorableProblem({ taskId: d.payload.taskId, policyVersion: d.payload.policyVersion })
      ) {
        out.push({
          eventId: d.payload.eventId.toLowerCase(),
          taskId: d.payload.taskId,
          step: d.payload.step,
          rewards: d.payload.rewards,
        });
      }
    } catch {
      // Undecodable records went to the DLQ in the live pipeline too.
    }
  }
  return out;
}

/**
 * The campaign's groups as forEachCampaignGroup reads them, with `readPast(step)`: whether every
 * partition of `partitions` (those that hold the campaign's groups) has been read past the step
 * (a later step of the campaign read from it) or to its end. A task's groups stay in one
 * partition in production order, so a step that every partition was read past has all its
 * groups read, save a group published late. Batches are handed over one at a time.
 */
export async function forEachCampaignGroupInOrder(
  topic: string,
  campaignId: string,
  partitions: readonly number[],
  onBatch: (groups: RecordedGroup[], readPast: (step: number) => boolean) => Promise<void>,
  /** The most bytes a fetch takes from a partition (the read-ahead); default 8 MiB. */
  maxBytesPerPartition = 8 << 20,
): Promise<void> {
  const skip = await processingFailed(topic);
  const ends = new Map(
    (await withAdmin((a) => a.fetchTopicOffsets(topic))).map((p) => [p.partition, Number(p.high)]),
  );
  const latest = new Map<number, number>();
  const ended = new Set<number>();
  const readPast = (step: number) =>
    partitions.every((p) => ended.has(p) || (latest.get(p) ?? Number.NEGATIVE_INFINITY) > step);
  let chain = Promise.resolve();
  const read = { client: openKafka({ clientId: 'rods-replay' }), maxBytesPerPartition };
  await readToEnd(
    topic,
    (records, partition) => {
      const out = campaignGroupsOf(records, partition, campaignId, skip);
      const last = records[records.length - 1];
      const atEnd = last !== undefined && Number(last.offset) + 1 >= (ends.get(partition) ?? 0);
      // One batch at a time, in the order they came, whatever the consumer runs at once; a
      // partition counts as read to a step only once its batch is handed over.
      chain = chain.then(async () => {
        for (const g of out) latest.set(partition, Math.max(latest.get(partition) ?? g.step, g.step));
        if (atEnd) ended.add(partition);
        await onBatch(out, readPast);
      });
      return chain;
    },
    read,
  );
  await chain;
}

/**
 * Dead letters of records that may decode and pass every check a replay can make, yet never
 * counted live: a record whose transaction kept failing (processing-failed, stages/aggregator/isolate.ts),
 * one that killed a reader (reader-crashed, platform/store/aggregator/suspects.ts), one an operator moved past
 * (operator-skipped, `rods aggregator skip-record`).
 */
export const PASSED_OVER_CODES: ReadonlySet<string> = new Set([
  'processing-failed',
  'reader-crashed',
  'operator-skipped',
]);

/**
 * The records of `sourceTopic` the aggregator dead-lettered without counting them although they
 * may decode (PASSED_OVER_CODES), as "partition:offset".
 */
export async function processingFailed(sourceTopic: string, dlqTopic = DLQ_TOPIC): Promise<Set<string>> {
  const out = new Set<string>();
  await readToEnd(dlqTopic, (records) => {
    for (const m of records) {
      try {
        const d = decode(m.value!);
        if (
          d.name === 'DeadLettered' &&
          PASSED_OVER_CODES.has(d.payload.reasonCode) &&
          d.payload.sourceTopic === sourceTopic
        )
          out.add(`${d.payload.partition}:${d.payload.offset}`);
      } catch {
        // Not a dead letter of ours.
      }
    }
  });
  return out;
}

type FoldConfig = { detector: DetectorConfig; rewards: RewardLimits };

/**
 * Folds groups into per-task states as the aggregator would; returns how many were counted.
 * `cfg` is one config, or the config in force for a group's step (a reconfigured campaign).
 * `seen` is each task's window of recent event ids, the aggregator's own (domain/dedupe.ts,
 * of the size its --dedupe-window gave): a repeat counts here exactly when it counted live
 * (a task's groups come in the same order from its one partition), and memory stays bounded by
 * tasks x window instead of growing with every event id of the campaign.
 */
export function foldGroups(
  groups: readonly RecordedGroup[],
  states: Map<string, TaskState>,
  seen: DedupeWindows,
  cfg: FoldConfig | ((step: number) => FoldConfig),
  /** Whether a group of this task and step may count (the campaign's ingestion.unknownTasks; default: yes). */
  known?: (taskId: string, step: number) => boolean,
): number {
  let n = 0;
  for (const g of groups) {
    if (seen.seen(g.taskId, g.eventId)) continue;
    const prev = states.get(g.taskId);
    const c = typeof cfg === 'function' ? cfg(g.step) : cfg;
    // A refused group is judged again if it comes again, as live (stages/aggregator/fold.ts).
    if (!prev && known && !known(g.taskId, g.step)) continue;
    if (checkGroup(g.rewards, g.step, prev?.lastStep, c.rewards)) continue;
    seen.remember(g.taskId, g.eventId);
    states.set(g.taskId, applyGroup(prev, g.rewards, g.step, c.detector, c.rewards.lateGroups).state);
    n++;
  }
  return n;
}

/**
 * forEachCampaignGroup + foldGroups, folding each batch as it arrives: the same states (folding is
 * sequential, and a task's groups stay in one partition, in order), without keeping every group
 * in memory until the read ends.
 */
export async function foldCampaignGroups(
  topic: string,
  campaignId: string,
  states: Map<string, TaskState>,
  seen: DedupeWindows,
  cfg: FoldConfig | ((step: number) => FoldConfig),
  skip?: ReadonlySet<string>,
  known?: (taskId: string, step: number) => boolean,
): Promise<number> {
  let n = 0;
  await forEachCampaignGroup(
    topic,
    campaignId,
    (groups) => {
      n += foldGroups(groups, states, seen, cfg, known);
    },
    skip,
  );
  return n;
}
