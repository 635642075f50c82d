// The aggregator's outputs end to end: metrics, the per-step statistics records (StepStatsRecorded)
// on the decisions topic through the event store and the outbox relay, and the `rods stats` /
// `rods watermark` commands.
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { streams } from '../../domain/ids.js';
import { stepStatsEntries } from '../../domain/task-stats.js';
import { decode } from '../../platform/codec/registry.js';
import { ensureTopics, readUntil, withAdmin } from '../../platform/kafka/client.js';
import { DECISIONS_TOPIC } from '../../platform/kafka/topology.js';
import { registerCampaign } from '../../platform/store/campaigns.js';
import { createPool } from '../../platform/store/db.js';
import { headCursor, readStream } from '../../platform/store/events/event-store.js';
import { waitForWatermark } from '../../platform/store/steps/watermark.js';
import { queryStats } from '../../platform/store/task-stats/view.js';
import { freePort } from '../../platform/util/free-port.js';
import { ROOT } from '../../test/support/sources.js';
import { defaultRoute, Relay } from '../relay/relay.js';
import { AggregatorService } from './service.js';
import { encodeRecord, freshRewardTopic, makeTrace, produceTrace } from './trace.js';

const execFileP = promisify(execFile);
const pool = createPool({ application: 'rods-pipeline-test', max: 8 });
const topics: string[] = [];

afterAll(async () => {
  if (topics.length) await withAdmin((a) => a.deleteTopics(topics));
  await pool.end();
});

async function rods(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await execFileP(process.execPath, [path.join(ROOT, 'bin/rods.mjs'), ...args], {
      cwd: ROOT,
    });
    return { code: 0, stdout, stderr };
  } catch (e) {
    const err = e as { code: number; stdout: string; stderr: string };
    return { code: err.code, stdout: err.stdout, stderr: err.stderr };
  }
}

describe('aggregator outputs', () => {
  it('serves metrics, publishes the per-step statistics records through the relay, and answers stats/watermark', async () => {
    const campaignId = `pipe-${randomUUID().slice(0, 8)}`;
    await registerCampaign(pool, { campaignId });
    const rewards = await freshRewardTopic('pipe.rewards', 3);
    const decisionsTopic = `pipe.decisions.${campaignId}`;
    topics.push(rewards, decisionsTopic);
    await withAdmin((a) =>
      ensureTopics(a, [
        {
          name: decisionsTopic,
          key: 'campaign',
          partitions: 1,
          replicationFactor: 1,
          config: {},
          doc: 'test',
        },
      ]),
    );
    const start = await headCursor(pool);
    const trace = makeTrace({ campaignId, tasks: 30, steps: 4, duplicateRate: 0.1, seed: 5 });
    await produceTrace(
      rewards,
      trace.records.map((r) => encodeRecord(r, campaignId)),
    );

    const port = await freePort();
    const svc = new AggregatorService(pool, {
      groupId: `g-${campaignId}`,
      topic: rewards,
      metricsPort: port,
      logLevel: 'warn',
    });
    await svc.start();
    let metrics = '';
    try {
      expect((await waitForWatermark(pool, campaignId, 4, { timeoutMs: 60_000, pollMs: 100 })).reached).toBe(
        true,
      );
      metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    } finally {
      await svc.stop();
    }
    const metric = (re: RegExp) => Number(re.exec(metrics)?.[1] ?? Number.NaN);
    expect(metric(/rods_aggregator_events_total\{outcome="applied"\} (\d+)/)).toBe(trace.groups.length);
    expect(metric(/rods_aggregator_events_total\{outcome="duplicate"\} (\d+)/)).toBe(trace.duplicates);
    // Every step closed once, in order. Another test file's aggregator sweeps every campaign's
    // ready steps and may close some of these first: the metric counts the ones this instance
    // closed, which its StepAggregated events name.
    const aggregated = (await readStream(pool, streams.steps(campaignId))).filter(
      (e) => e.type === 'StepAggregated',
    );
    expect(aggregated.map((e) => Number((e.payload as { step: number }).step))).toEqual([1, 2, 3, 4]);
    const closedHere = aggregated.filter((e) => e.metadata.closedBy === svc.instance).length;
    expect(metric(/rods_aggregator_steps_closed_total (\d+)/)).toBe(closedHere);
    expect(metrics).toMatch(/rods_aggregator_batch_seconds_count \d+/);

    // Relay this campaign's events (and whatever else is appended meanwhile) to test topics.
    const relay = new Relay(pool, {
      name: `pipe-${campaignId}`,
      startAfter: start,
      route: (e) => {
        // The records go where the default route sends them: the decisions topic, by campaign.
        expect(defaultRoute(e).topic).toBe(DECISIONS_TOPIC);
        return { topic: decisionsTopic, key: defaultRoute(e).key };
      },
    });
    await relay.start();
    try {
      await relay.run({ untilCaughtUp: true });
    } finally {
      await relay.stop();
    }

    // Each task's entry with the most groups, over the campaign's records, equals its statistics.
    const latest = new Map<string, { groupCount: number; mean: number }>();
    let records = 0;
    await readUntil(
      decisionsTopic,
      (record) => {
        const d = decode(record.value!);
        if (d.name !== 'StepStatsRecorded' || d.payload.campaignId !== campaignId) return false;
        expect(record.key!.toString()).toBe(campaignId);
        records++;
        for (const t of stepStatsEntries(d.payload.tasks))
          if ((latest.get(t.taskId)?.groupCount ?? 0) < t.groupCount)
            latest.set(t.taskId, { groupCount: t.groupCount, mean: t.mean });
        return latest.size === 30 && [...latest.values()].every((v) => v.groupCount === 4);
      },
      { timeoutMs: 60_000 },
    ).catch((e: Error) => {
      throw new Error(`only ${latest.size} task keys seen (${e.message})`);
    });
    const rows = await queryStats(pool, { campaignId });
    for (const r of rows) expect(latest.get(r.taskId)).toEqual({ groupCount: r.groups, mean: r.mean });
    // A record per step and batch, not per group: at most 4 steps x 3 partitions x batches, far
    // fewer than the 120 groups.
    expect(records).toBeGreaterThanOrEqual(4);
    expect(records).toBeLessThan(trace.groups.length / 2);

    // The CLI views.
    const stats = await rods(['stats', '--campaign', campaignId, '--json']);
    expect(stats.code).toBe(0);
    const printed = JSON.parse(stats.stdout) as Record<string, unknown>[];
    expect(printed).toHaveLength(30);
    expect(Object.keys(printed[0]!).sort()).toEqual(
      [
        'band',
        'campaignId',
        'ewma',
        'groups',
        'lastStep',
        'latestMean',
        'latestVariance',
        'mean',
        'phi',
        'rollouts',
        'taskId',
        'variance',
      ].sort(),
    );
    const boundary = await rods(['stats', '--campaign', campaignId, '--band', 'boundary', '--json']);
    expect((JSON.parse(boundary.stdout) as { band: string }[]).every((r) => r.band === 'boundary')).toBe(
      true,
    );
    expect((await rods(['stats', '--campaign', campaignId, '--band', 'lukewarm'])).code).toBe(2);
    expect((await rods(['stats', '--campaign', `nope-${randomUUID()}`])).code).toBe(2);
    const w = await rods([
      'watermark',
      '--campaign',
      campaignId,
      '--step',
      '4',
      '--wait',
      '--timeout',
      '5',
      '--json',
    ]);
    expect(w.code).toBe(0);
    expect(JSON.parse(w.stdout)).toMatchObject({ reached: true, open: [] });
    const late = await rods([
      'watermark',
      '--campaign',
      campaignId,
      '--step',
      '9',
      '--wait',
      '--timeout',
      '1',
    ]);
    expect(late.code).toBe(3);
    expect(late.stderr).toMatch(/step 9 not aggregated/);
  }, 240_000);
});
