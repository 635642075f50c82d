import { randomUUID } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { streams } from '../../domain/ids.js';
import { decode, encode } from '../../platform/codec/registry.js';
import { frame } from '../../platform/codec/single-object.js';
import { readUntil } from '../../platform/kafka/client.js';
import { DLQ_TOPIC } from '../../platform/kafka/dlq.js';
import { registerCampaign } from '../../platform/store/campaigns.js';
import { createPool } from '../../platform/store/db.js';
import { readStream } from '../../platform/store/events/event-store.js';
import { waitForWatermark, watermark } from '../../platform/store/steps/watermark.js';
import { queryStats } from '../../platform/store/task-stats/view.js';
import type { EventPayloads } from '../../schemas/types.generated.js';
import { AggregatorService } from './service.js';
import { encodeRecord, freshRewardTopic, makeTrace, produceTrace, referenceStats } from './trace.js';

const pool = createPool({ application: 'rods-aggregator-test', max: 8 });
afterAll(() => pool.end());

function rel(a: number, b: number): number {
  return a === b ? 0 : Math.abs(a - b) / Math.max(Math.abs(a), Math.abs(b));
}

async function runUntil<T>(
  svc: AggregatorService,
  until: () => Promise<T | undefined>,
  timeoutMs = 120_000,
): Promise<T> {
  await svc.start();
  try {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const v = await until();
      if (v !== undefined) return v;
      if (Date.now() > deadline) throw new Error('aggregator did not finish in time');
      await new Promise((r) => setTimeout(r, 200));
    }
  } finally {
    await svc.stop();
  }
}

describe('stream aggregator', () => {
  it('computes per-task statistics equal to an offline reference, counts duplicates once, and aggregates steps', async () => {
    const campaignId = `agg-${randomUUID().slice(0, 8)}`;
    await registerCampaign(pool, { campaignId });
    const topic = await freshRewardTopic('agg.rewards');
    const trace = makeTrace({ campaignId, tasks: 40, steps: 6, duplicateRate: 0.1, seed: 7 });
    expect(trace.duplicates).toBeGreaterThan(5);
    await produceTrace(
      topic,
      trace.records.map((r) => encodeRecord(r, campaignId)),
    );

    const svc = new AggregatorService(pool, { groupId: `g-${campaignId}`, topic, logLevel: 'warn' });
    const w = await runUntil(svc, async () => {
      const s = await watermark(pool, campaignId, 6);
      return s.reached ? s : undefined;
    });
    expect(w.open).toEqual([]);

    const ref = referenceStats(trace.groups);
    const rows = await queryStats(pool, { campaignId });
    expect(rows).toHaveLength(40);
    for (const r of rows) {
      const e = ref.get(r.taskId)!;
      expect(r.groups).toBe(e.groups);
      expect(r.rollouts).toBe(e.rollouts);
      expect(rel(r.mean, e.mean)).toBeLessThan(1e-12);
      expect(rel(r.variance, e.variance)).toBeLessThan(1e-12);
      expect(rel(r.latestMean, e.latestMean)).toBeLessThan(1e-12);
      expect(r.lastStep).toBe(6);
      expect(r.phi).toBeCloseTo(4 * r.latestMean * (1 - r.latestMean), 14);
      expect(r.band).toBe(r.latestMean < 0.2 ? 'hard' : r.latestMean > 0.85 ? 'mastered' : 'boundary');
    }
    // One StepAggregated per step, each counting every group of the step once.
    const stepEvents = await readStream(pool, streams.steps(campaignId));
    expect(stepEvents.map((e) => (e.payload as { step: number }).step)).toEqual([1, 2, 3, 4, 5, 6]);
    for (const e of stepEvents) {
      const p = e.payload as {
        groupCount: number;
        hard: { tasks: number };
        boundary: { tasks: number };
        mastered: { tasks: number };
      };
      expect(p.groupCount).toBe(40);
      expect(p.hard.tasks + p.boundary.tasks + p.mastered.tasks).toBe(40);
    }
    // The statistics are in the store per step (hash-chained, relayed to Kafka by the outbox), band
    // changes with them: each task's first observation sets its band.
    const firstBands = new Set<string>();
    let records = 0;
    for (let p = 0; p < 6; p++) {
      for (const e of await readStream(pool, streams.stats(campaignId, topic, p))) {
        expect(e.type).toBe('StepStatsRecorded');
        records++;
        const { tasks } = e.payload as EventPayloads['StepStatsRecorded'];
        tasks.bandBefore.forEach((b, i) => {
          if (b === null) firstBands.add(tasks.taskId[i]!);
        });
      }
    }
    expect(firstBands.size).toBe(40);
    expect(records).toBeLessThan(40 * 6);
    await expect(waitForWatermark(pool, campaignId, 7, { timeoutMs: 300 })).rejects.toThrow(/step 7/);
  });

  it('sends one record of each bad kind to the DLQ with its reason, and the statistics equal the clean trace', async () => {
    const campaignId = `poison-${randomUUID().slice(0, 8)}`;
    // A stale group is refused in reject-stale mode (fold mode counts it: domain/reward-group.ts).
    await registerCampaign(pool, {
      campaignId,
      config: { rewards: { staleStepTolerance: 1, lateGroups: 'reject-stale' } },
    });
    const topic = await freshRewardTopic('agg.poison', 1);
    const trace = makeTrace({ campaignId, tasks: 5, steps: 3, seed: 3 });
    const clean = trace.records.map((r) => encodeRecord(r, campaignId));
    const group = (over: Record<string, unknown>) =>
      encode('RolloutGroupScored', {
        eventId: randomUUID(),
        campaignId,
        taskId: 'task-00000',
        step: 3,
        policyVersion: 'p',
        rewards: new Array(16).fill(0.5),
        producedAt: 1,
        ...over,
      } as never);
    const poison: { code: string; key: string; value: Buffer }[] = [
      { code: 'bad-magic', key: 'task-00000', value: Buffer.from('not avro at all') },
      {
        code: 'unknown-fingerprint',
        key: 'task-00000',
        value: frame(Buffer.alloc(8, 0xab), Buffer.from([1, 2, 3])),
      },
      { code: 'non-finite-reward', key: 'task-00000', value: group({ rewards: [0.5, Number.NaN] }) },
      { code: 'non-finite-reward', key: 'task-00000', value: group({ rewards: [Number.POSITIVE_INFINITY] }) },
      {
        code: 'non-finite-reward',
        key: 'task-00000',
        value: group({ rewards: [Number.NEGATIVE_INFINITY, 0] }),
      },
      { code: 'reward-out-of-range', key: 'task-00000', value: group({ rewards: [0.5, 1.5] }) },
      { code: 'empty-rewards', key: 'task-00000', value: group({ rewards: [] }) },
      { code: 'too-many-rollouts', key: 'task-00000', value: group({ rewards: new Array(1025).fill(0.5) }) },
      { code: 'unknown-campaign', key: 'task-00000', value: group({ campaignId: `nope-${randomUUID()}` }) },
      { code: 'stale-step', key: 'task-00000', value: group({ step: 1 }) },
    ];
    // Poison after the clean records (so the stale step is stale), then one more clean group.
    const extra = makeTrace({ campaignId, tasks: 1, steps: 4, seed: 99 }).records.filter(
      (r) => r.kind === 'group' && r.group.step === 4,
    );
    await produceTrace(topic, [
      ...clean,
      ...poison.map(({ key, value }) => ({ key, value })),
      ...extra.map((r) => encodeRecord(r, campaignId)),
    ]);

    const svc = new AggregatorService(pool, { groupId: `g-${campaignId}`, topic, logLevel: 'silent' });
    await runUntil(svc, async () => {
      const rows = await queryStats(pool, { campaignId, taskId: 'task-00000' });
      return rows[0]?.lastStep === 4 ? rows : undefined;
    });

    // The statistics equal those of the clean trace plus the one clean extra group.
    const ref = referenceStats([
      ...trace.groups,
      ...extra.map((r) => (r.kind === 'group' ? r.group : null)!),
    ]);
    const rows = await queryStats(pool, { campaignId });
    for (const r of rows) {
      const e = ref.get(r.taskId)!;
      expect([r.taskId, r.groups, r.rollouts]).toEqual([r.taskId, e.groups, e.rollouts]);
      expect(rel(r.variance, e.variance)).toBeLessThan(1e-12);
    }

    // Each poison record is in the DLQ with its code, source topic, partition, offset and bytes.
    const letters = new Map<number, { code: string; value: Buffer | null; reason: string }>();
    await readUntil(
      DLQ_TOPIC,
      (record) => {
        const d = decode(record.value!);
        if (d.name !== 'DeadLettered' || d.payload.sourceTopic !== topic) return false;
        letters.set(d.payload.offset, {
          code: d.payload.reasonCode,
          value: d.payload.value,
          reason: d.payload.reason,
        });
        return letters.size >= poison.length;
      },
      { timeoutMs: 60_000 },
    ).catch((e: Error) => {
      throw new Error(`only ${letters.size} dead letters found (${e.message})`);
    });
    const sorted = [...letters.entries()].sort((a, b) => a[0] - b[0]);
    expect(sorted.map(([, l]) => l.code)).toEqual(poison.map((p) => p.code));
    sorted.forEach(([offset, l], i) => {
      expect(offset).toBe(clean.length + i);
      expect(Buffer.compare(l.value!, poison[i]!.value)).toBe(0);
      expect(l.reason.length).toBeGreaterThan(5);
    });
  });
});
