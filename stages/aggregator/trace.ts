// Synthetic reward traces for the aggregator's tests and benchmark: deterministic for a seed,
// with duplicates mixed in, produced to Kafka exactly as a trainer's ingestion would, and an
// offline reference computed independently of the aggregator (two-pass mean and variance).
import { randomUUID } from 'node:crypto';
import { eventIds } from '../../domain/ids.js';
import { encode } from '../../platform/codec/registry.js';
import { ensureTopics, openKafka, withAdmin } from '../../platform/kafka/client.js';
import { xorshift32 } from '../../platform/util/xorshift.js';

export interface TraceGroup {
  eventId: string;
  campaignId: string;
  taskId: string;
  step: number;
  rewards: number[];
}

export interface TraceOptions {
  campaignId: string;
  tasks: number;
  steps: number;
  k?: number;
  /** Share of groups sent a second time later in the stream. */
  duplicateRate?: number;
  seed?: number;
}

export interface Trace {
  /** What goes on the wire, in order: groups (duplicates included) and one StepClosed per step. */
  records: ({ kind: 'group'; group: TraceGroup } | { kind: 'close'; step: number; groupCount: number })[];
  /** Distinct groups. */
  groups: TraceGroup[];
  duplicates: number;
}

/** xorshift32 in [0, 1): the same seed gives the same sequence (traces, and the crash tests' pauses). */
export const rng = xorshift32;

/** Tasks with a latent success rate that drifts up over the steps (some hard, some boundary, some mastered). */
export function makeTrace(opts: TraceOptions): Trace {
  const k = opts.k ?? 16;
  const rand = rng(opts.seed ?? 42);
  const base = Array.from({ length: opts.tasks }, () => rand());
  const records: Trace['records'] = [];
  const groups: TraceGroup[] = [];
  const pendingDupes: TraceGroup[] = [];
  let duplicates = 0;
  for (let step = 1; step <= opts.steps; step++) {
    for (let t = 0; t < opts.tasks; t++) {
      const p = Math.min(1, base[t]! + (step / opts.steps) * 0.3 * rand());
      // Progress rewards in [0,1]: a share of turns solved, in sixteenths.
      const rewards = Array.from({ length: k }, () =>
        rand() < p ? (rand() < 0.5 ? 1 : Math.floor(rand() * 16) / 16) : 0,
      );
      const g: TraceGroup = {
        eventId: eventIds.traceRolloutGroup(opts.campaignId, opts.seed ?? 42, step, t),
        campaignId: opts.campaignId,
        taskId: `task-${String(t).padStart(5, '0')}`,
        step,
        rewards,
      };
      groups.push(g);
      records.push({ kind: 'group', group: g });
      if (rand() < (opts.duplicateRate ?? 0)) pendingDupes.push(g);
      // A retrying producer sends the duplicate a little later.
      if (pendingDupes.length > 0 && rand() < 0.5) {
        records.push({ kind: 'group', group: pendingDupes.shift()! });
        duplicates++;
      }
    }
    records.push({ kind: 'close', step, groupCount: opts.tasks });
  }
  for (const g of pendingDupes) {
    records.push({ kind: 'group', group: g });
    duplicates++;
  }
  return { records, groups, duplicates };
}

export interface ReferenceStats {
  groups: number;
  rollouts: number;
  mean: number;
  variance: number;
  latestMean: number;
  lastStep: number;
}

/** Offline reference per task: two-pass over all rewards of its distinct groups. */
export function referenceStats(groups: TraceGroup[]): Map<string, ReferenceStats> {
  const byTask = new Map<string, TraceGroup[]>();
  for (const g of groups) byTask.set(g.taskId, [...(byTask.get(g.taskId) ?? []), g]);
  const out = new Map<string, ReferenceStats>();
  for (const [task, list] of byTask) {
    const all = list.flatMap((g) => g.rewards);
    const mean = all.reduce((a, b) => a + b, 0) / all.length;
    const variance = all.reduce((a, x) => a + (x - mean) ** 2, 0) / all.length;
    const latest = list[list.length - 1]!;
    out.set(task, {
      groups: list.length,
      rollouts: all.length,
      mean,
      variance,
      latestMean: latest.rewards.reduce((a, b) => a + b, 0) / latest.rewards.length,
      lastStep: latest.step,
    });
  }
  return out;
}

export async function freshRewardTopic(prefix: string, partitions = 6): Promise<string> {
  const name = `${prefix}.${randomUUID().slice(0, 8)}`;
  await withAdmin((a) =>
    ensureTopics(a, [
      // As the rewards topic is kept (the aggregator checks its topic's settings at start).
      {
        name,
        key: 'task id',
        partitions,
        replicationFactor: 1,
        config: { 'retention.ms': '-1', 'cleanup.policy': 'delete' },
        doc: 'aggregator test rewards',
      },
    ]),
  );
  return name;
}

export function encodeRecord(
  r: Trace['records'][number],
  campaignId: string,
): { key: string; value: Buffer } {
  if (r.kind === 'group') {
    return {
      key: r.group.taskId,
      value: encode('RolloutGroupScored', {
        eventId: r.group.eventId,
        campaignId: r.group.campaignId,
        taskId: r.group.taskId,
        step: r.group.step,
        policyVersion: `policy-${r.group.step}`,
        rewards: r.group.rewards,
        producedAt: 1_700_000_000_000 + r.group.step,
      }),
    };
  }
  return {
    key: `${campaignId}/step-close`,
    value: encode('StepClosed', {
      eventId: eventIds.traceStepClosed(campaignId, r.step),
      campaignId,
      step: r.step,
      groupCount: r.groupCount,
      producedAt: 1_700_000_000_000 + r.step,
    }),
  };
}

/** Produces the records in order (idempotent producer, acks=all), in chunks. */
export async function produceTrace(
  topic: string,
  records: { key: string; value: Buffer }[],
  onProgress?: (sent: number) => void,
  /** Pause between chunks of 2,000, to stretch the stream over time (crash tests). */
  paceMs = 0,
): Promise<void> {
  const p = await openKafka({ clientId: 'rods-trace' }).producer({ idempotent: true });
  try {
    for (let i = 0; i < records.length; i += 2000) {
      await p.send(topic, records.slice(i, i + 2000));
      onProgress?.(Math.min(records.length, i + 2000));
      if (paceMs > 0) await new Promise((r) => setTimeout(r, paceMs));
    }
  } finally {
    await p.disconnect();
  }
}

/** One RolloutGroupScored record as a trainer would send it (four rewards, step 1 unless given). */
export function rewardGroupRecord(
  campaignId: string,
  taskId: string,
  over: Record<string, unknown> = {},
): { key: string; value: Buffer } {
  return {
    key: taskId,
    value: encode('RolloutGroupScored', {
      eventId: randomUUID(),
      campaignId,
      taskId,
      step: 1,
      policyVersion: 'p1',
      rewards: [0.25, 0.5, 0.75, 1],
      producedAt: 1,
      ...over,
    } as never),
  };
}
