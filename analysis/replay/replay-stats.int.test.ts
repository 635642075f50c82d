// Replay rebuilds task statistics from the aggregator's per-step records (StepStatsRecorded), and
// from the per-group TaskStatsUpdated events of campaigns recorded before them, equal to live.
import { randomUUID } from 'node:crypto';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { eventIds, streams } from '../../domain/ids.js';
import { stepStatsEntries } from '../../domain/task-stats.js';
import { defaultRegistry } from '../../platform/codec/registry.js';
import { registerCampaign } from '../../platform/store/campaigns.js';
import { createPool } from '../../platform/store/db.js';
import { append, readStream, typedEvent } from '../../platform/store/events/event-store.js';
import { queryStats } from '../../platform/store/task-stats/view.js';
import type { EventPayloads } from '../../schemas/types.generated.js';
import { processBatch } from '../../stages/aggregator/batch.js';
import { CampaignCache } from '../../stages/aggregator/campaign-cache.js';
import { encodeRecord, type TraceGroup } from '../../stages/aggregator/trace.js';
import { replayCampaign, replaySchema } from './replay.js';

const endpoints = inject('endpoints');
const pool = createPool({ application: 'rods-replay-stats-test', max: 4 });
const ownerPool = createPool({
  connectionString: endpoints.ownerDatabaseUrl ?? endpoints.databaseUrl,
  application: 'rods-replay-stats-test-owner',
  max: 2,
});
const schemas: string[] = [];
const registry = defaultRegistry();

afterAll(async () => {
  for (const s of schemas) await ownerPool.query(`drop schema if exists ${s} cascade`);
  await pool.end();
  await ownerPool.end();
});

const group = (campaignId: string, taskId: string, step: number, rewards: number[]): TraceGroup => ({
  eventId: randomUUID(),
  campaignId,
  taskId,
  step,
  rewards,
});

async function applyBatch(campaignId: string, topic: string, groups: TraceGroup[], offset: number) {
  const records = groups.map((g, i) => {
    const r = encodeRecord({ kind: 'group', group: g }, campaignId);
    return { offset: String(offset + i), key: Buffer.from(r.key), value: r.value };
  });
  return processBatch(
    {
      pool,
      registry,
      campaigns: new CampaignCache(pool),
      groupId: `replay-stats-${campaignId}`,
      deadLetter: async () => {},
    },
    topic,
    0,
    records,
  );
}

describe('replay of task statistics', () => {
  it('takes each task from its entry with the most groups, though a late group comes in an earlier step', async () => {
    const campaignId = `rstats-${randomUUID().slice(0, 8)}`;
    schemas.push(replaySchema(campaignId));
    // Late groups are folded: a step-1 group applied after step 3 changes the moments only.
    await registerCampaign(pool, { campaignId, config: { rewards: { lateGroups: 'fold' } } });
    const topic = `rstats.${campaignId}`;
    await applyBatch(
      campaignId,
      topic,
      [group(campaignId, 'a', 1, [0.25, 0.5]), group(campaignId, 'b', 1, [1])],
      0,
    );
    // One batch: a's step-3 group, then its late step-1 group; b's step-3 group.
    const r = await applyBatch(
      campaignId,
      topic,
      [
        group(campaignId, 'a', 3, [0.75]),
        group(campaignId, 'b', 3, [0]),
        group(campaignId, 'a', 1, [1, 1, 1]),
      ],
      2,
    );
    expect(r.applied).toBe(3);
    const records = (await readStream(pool, streams.stats(campaignId, topic, 0))).map((e) => {
      const p = e.payload as EventPayloads['StepStatsRecorded'];
      return { step: p.step, tasks: stepStatsEntries(p.tasks) };
    });
    // Two records for the second batch, in step order: step 1 (a after its late group) then step 3.
    expect(records.map((p) => [p.step, p.tasks.map((t) => [t.taskId, t.groupCount])])).toEqual([
      [
        1,
        [
          ['a', 1],
          ['b', 1],
        ],
      ],
      [1, [['a', 3]]],
      [
        3,
        [
          ['a', 2],
          ['b', 2],
        ],
      ],
    ]);
    const live = await queryStats(pool, { campaignId });
    expect(live.find((t) => t.taskId === 'a')).toMatchObject({
      groups: 3,
      rollouts: 6,
      lastStep: 3,
      latestMean: 0.75,
    });

    const report = await replayCampaign(ownerPool, { campaignId, fresh: true });
    expect(report.tables.find((t) => t.table === 'task_stats')).toMatchObject({ equal: true, liveRows: 2 });
    expect(report.equal).toBe(true);
  });

  it('rebuilds a campaign recorded before the per-step record from its TaskStatsUpdated events', async () => {
    const campaignId = `rlegacy-${randomUUID().slice(0, 8)}`;
    schemas.push(replaySchema(campaignId));
    await registerCampaign(pool, { campaignId });
    const topic = `rlegacy.${campaignId}`;
    await applyBatch(
      campaignId,
      topic,
      [group(campaignId, 'a', 1, [0.5]), group(campaignId, 'b', 1, [0])],
      0,
    );
    await applyBatch(campaignId, topic, [group(campaignId, 'a', 2, [1])], 2);
    // The log as the aggregator wrote it before: the same statistics as per-task events, in a
    // stream of the old naming, and no per-step record.
    const stream = streams.stats(campaignId, topic, 0);
    const recorded = (await readStream(pool, stream)).map((e) =>
      stepStatsEntries((e.payload as EventPayloads['StepStatsRecorded']).tasks),
    );
    await ownerPool.query(
      `begin; set local rods.allow_event_mutation = 'on';
       delete from events where stream_id = '${stream}'; delete from streams where stream_id = '${stream}'; commit`,
    );
    const legacy = recorded.flatMap((tasks) =>
      tasks.map((t) => {
        const sourceEventId = randomUUID();
        return typedEvent('TaskStatsUpdated', {
          eventId: eventIds.taskStatsUpdated(campaignId, sourceEventId),
          campaignId,
          taskId: t.taskId,
          stats: {
            groupCount: t.groupCount,
            count: t.count,
            mean: t.mean,
            m2: t.m2,
            variance: t.m2 / t.count,
            latestGroupMean: t.latestGroupMean,
            latestGroupVariance: t.latestGroupVariance,
            ewma: t.ewma,
            signal: t.signal,
            phi: 4 * t.signal * (1 - t.signal),
            band: t.band,
            lastStep: t.lastStep,
          },
          sourceEventId,
          occurredAt: Date.now(),
        });
      }),
    );
    expect(legacy).toHaveLength(3);
    await append(pool, `stats-${campaignId}-${topic}-0`, 'no-stream', legacy);

    const report = await replayCampaign(ownerPool, { campaignId, fresh: true });
    expect(report.tables.find((t) => t.table === 'task_stats')).toMatchObject({ equal: true, replayRows: 2 });
    expect(report.equal).toBe(true);
  });
});
