// A reconfiguration reaches a running aggregator: the same instance that folded a campaign's
// groups under the old band thresholds bands the groups of later steps with the new ones (its
// campaign cache re-checks the config version in every batch), and the replay of the campaign,
// from the event store and from the reward topic, still equals live.
import { randomUUID } from 'node:crypto';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { workerEvent } from '../../activities/events.js';
import { kafkaStatsCheck } from '../../analysis/replay/kafka-source.js';
import { replayCampaign } from '../../analysis/replay/replay.js';
import { streams } from '../../domain/ids.js';
import { lockedConfigVersions, registerCampaign } from '../../platform/store/campaigns.js';
import { createPool } from '../../platform/store/db.js';
import { readStream } from '../../platform/store/events/event-store.js';
import { recordEvents } from '../../platform/store/pool/projection.js';
import { waitForWatermark } from '../../platform/store/steps/watermark.js';
import { queryStats } from '../../platform/store/task-stats/view.js';
import { staysFalse, waitUntil } from '../../test/support/wait.js';
import { AggregatorService } from './service.js';
import { encodeRecord, freshRewardTopic, produceTrace, type TraceGroup } from './trace.js';

const pool = createPool({ application: 'rods-reconfigure-test', max: 4 });
// Replays build scratch schemas, which only the owner role may (platform/store/migrate.ts).
const endpoints = inject('endpoints');
const owner = createPool({ connectionString: endpoints.ownerDatabaseUrl ?? endpoints.databaseUrl, max: 2 });
afterAll(async () => {
  await pool.end();
  await owner.end();
});

const TASKS = ['task-a', 'task-b', 'task-c', 'task-d'];

/** One group per task at `step`, every reward 0.5 (boundary at 0.2/0.85, hard at 0.6/0.9), then StepClosed. */
function stepRecords(campaignId: string, step: number) {
  const groups: TraceGroup[] = TASKS.map((taskId) => ({
    eventId: randomUUID(),
    campaignId,
    taskId,
    step,
    rewards: new Array(16).fill(0.5),
  }));
  return [
    ...groups.map((group) => encodeRecord({ kind: 'group', group }, campaignId)),
    encodeRecord({ kind: 'close', step, groupCount: groups.length }, campaignId),
  ];
}

describe('reconfiguring a campaign', () => {
  it('reaches the running aggregator at the next step, and replay still equals live', async () => {
    const campaignId = `reconf-${randomUUID().slice(0, 8)}`;
    const before = { detector: { low: 0.2, high: 0.85 } };
    const after = { detector: { low: 0.6, high: 0.9 } };
    await registerCampaign(pool, { campaignId, config: before });
    const topic = await freshRewardTopic('agg.reconf', 2);
    const svc = new AggregatorService(pool, { groupId: `g-${campaignId}`, topic, logLevel: 'warn' });
    await svc.start();
    try {
      await produceTrace(topic, stepRecords(campaignId, 1));
      await waitForWatermark(pool, campaignId, 1, { timeoutMs: 60_000 });
      const bands = async () =>
        (await queryStats(pool, { campaignId })).map((r) => [r.taskId, r.lastStep, r.band]);
      expect(await bands()).toEqual(TASKS.map((t) => [t, 1, 'boundary']));

      // Recorded as the campaign workflow's reconfigure update does (its recordEvents activity).
      await recordEvents(pool, streams.campaign(campaignId), [
        workerEvent('CampaignReconfigured', randomUUID(), {
          campaignId,
          config: JSON.stringify(after),
          changedKeys: ['detector.high', 'detector.low'],
          reason: null,
          actor: null,
          occurredAt: Date.now(),
        }),
      ]);
      const versions = await pool.query(
        'select version, from_step from campaign_configs where campaign_id = $1 order by version',
        [campaignId],
      );
      // Step 1 was counted already: the new thresholds apply from step 2.
      expect(versions.rows).toEqual([
        { version: 1, from_step: 0 },
        { version: 2, from_step: 2 },
      ]);

      await produceTrace(topic, stepRecords(campaignId, 2));
      await waitForWatermark(pool, campaignId, 2, { timeoutMs: 60_000 });
      expect(await bands()).toEqual(TASKS.map((t) => [t, 2, 'hard']));
      // Band changes ride in the per-step statistics records (bandBefore beside band).
      const changes: { step: number; from: string | null; to: string }[] = [];
      for (let p = 0; p < 2; p++)
        for (const e of await readStream(pool, streams.stats(campaignId, topic, p)))
          if (e.type === 'StepStatsRecorded') {
            const r = e.payload as { step: number; tasks: { band: string[]; bandBefore: (string | null)[] } };
            r.tasks.band.forEach((to, i) => {
              const from = r.tasks.bandBefore[i] ?? null;
              if (from !== to) changes.push({ step: Number(r.step), from, to });
            });
          }
      expect(changes.filter((c) => c.step === 2).map((c) => [c.from, c.to])).toEqual(
        TASKS.map(() => ['boundary', 'hard']),
      );
    } finally {
      await svc.stop();
    }

    // Replay from the event store (resumable, so it catches up with transactions other tests hold
    // open) rebuilds the config versions and statistics equal to live.
    const replay = await waitUntil(
      async () => {
        const r = await replayCampaign(owner, { campaignId });
        return r.equal && r.tables.find((t) => t.table === 'task_stats')!.replayRows === TASKS.length && r;
      },
      { what: 'a replay equal to live', timeoutMs: 60_000, intervalMs: 500 },
    );
    expect(replay.tables.find((t) => t.table === 'campaign_configs')).toMatchObject({
      equal: true,
      liveRows: 2,
    });
    await owner.query(`drop schema if exists ${replay.schema} cascade`);
    // Replay from the reward topic folds each step with its config version: the same bands.
    expect(await kafkaStatsCheck(pool, campaignId, topic)).toMatchObject({
      equal: true,
      tasks: TASKS.length,
    });
  }, 180_000);

  it('waits for a batch folding with the old version, and applies from the step after what it counted', async () => {
    const campaignId = `reconf-lock-${randomUUID().slice(0, 8)}`;
    await registerCampaign(pool, { campaignId });
    // A batch in flight: it read version 1 under the shared lock and counts a group of step 5.
    const batch = await pool.connect();
    let reconfigured = false;
    try {
      await batch.query('begin');
      expect(await lockedConfigVersions(batch, [campaignId])).toEqual(new Map([[campaignId, 1]]));
      await batch.query(
        `insert into step_progress (campaign_id, step, topic, partition, groups_applied) values ($1, 5, 't', 0, 1)`,
        [campaignId],
      );
      const done = recordEvents(pool, streams.campaign(campaignId), [
        workerEvent('CampaignReconfigured', randomUUID(), {
          campaignId,
          config: JSON.stringify({ detector: { low: 0.3 } }),
          changedKeys: ['detector.low'],
          reason: null,
          actor: null,
          occurredAt: Date.now(),
        }),
      ]).then(() => {
        reconfigured = true;
      });
      await staysFalse(() => reconfigured, 1000, {
        what: 'the reconfiguration committing while a batch folds with the old version',
      });
      await batch.query('commit');
      await done;
    } finally {
      batch.release();
    }
    const v = await pool.query(
      'select version, from_step from campaign_configs where campaign_id = $1 order by version',
      [campaignId],
    );
    expect(v.rows).toEqual([
      { version: 1, from_step: 0 },
      { version: 2, from_step: 6 },
    ]);
  });
});
