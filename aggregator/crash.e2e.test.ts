// Real crashes: aggregator processes killed with SIGKILL at random moments while rewards stream
// in. Afterwards the statistics must equal an offline reference of the same trace: identical
// counts, mean and variance within 1e-12 relative.
import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { withAdmin } from '../kafka/client.js';
import { registerCampaign } from '../store/campaigns.js';
import { createPool } from '../store/db.js';
import { queryStats } from './stats-query.js';
import { watermark } from './steps.js';
import { encodeRecord, freshRewardTopic, makeTrace, produceTrace, referenceStats } from './trace.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const pool = createPool({ application: 'rods-crash-test', max: 4 });
const topics: string[] = [];
const children = new Set<ChildProcess>();
let stderrTail = '';

afterAll(async () => {
  for (const c of children) c.kill('SIGKILL');
  if (topics.length) await withAdmin((a) => a.deleteTopics({ topics }));
  await pool.end();
});

function startAggregator(topic: string, group: string): ChildProcess {
  const child = spawn(
    process.execPath,
    [
      path.join(ROOT, 'bin/rods.mjs'),
      'aggregator',
      '--topic',
      topic,
      '--group',
      group,
      '--session-timeout-ms',
      '6000',
    ],
    { cwd: ROOT, stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, RODS_LOG_LEVEL: 'warn' } },
  );
  child.stderr!.on('data', (d: Buffer) => {
    stderrTail = (stderrTail + d.toString()).slice(-4000);
  });
  children.add(child);
  child.once('exit', () => children.delete(child));
  return child;
}

function killHard(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    child.once('exit', () => resolve());
    child.kill('SIGKILL');
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function waitForLastStep(campaignId: string, step: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const w = await watermark(pool, campaignId, step);
    if (w.reached) return;
    if (Date.now() > deadline) {
      throw new Error(`step ${step} not aggregated: ${JSON.stringify(w.open.slice(0, 5))}\n${stderrTail}`);
    }
    await sleep(500);
  }
}

async function expectEqualToReference(
  campaignId: string,
  trace: ReturnType<typeof makeTrace>,
): Promise<void> {
  const ref = referenceStats(trace.groups);
  const rows = await queryStats(pool, { campaignId });
  expect(rows.length).toBe(ref.size);
  let worstMean = 0;
  let worstVar = 0;
  for (const r of rows) {
    const e = ref.get(r.taskId)!;
    // Identical counts: every group once, no duplicate counted.
    if (r.groups !== e.groups || r.rollouts !== e.rollouts) {
      throw new Error(
        `${r.taskId}: ${r.groups} groups / ${r.rollouts} rollouts, expected ${e.groups} / ${e.rollouts}`,
      );
    }
    worstMean = Math.max(worstMean, Math.abs(r.mean - e.mean) / Math.max(Math.abs(e.mean), 1e-300));
    worstVar = Math.max(worstVar, Math.abs(r.variance - e.variance) / Math.max(Math.abs(e.variance), 1e-300));
  }
  expect(worstMean).toBeLessThan(1e-12);
  expect(worstVar).toBeLessThan(1e-12);
}

describe('aggregator under real crashes', () => {
  it('10 kill -9 at random moments while streaming 200,000 groups of 16 with 5 % duplicates: statistics equal the offline reference', async () => {
    const campaignId = `crash-${randomUUID().slice(0, 8)}`;
    await registerCampaign(pool, { campaignId });
    const topic = await freshRewardTopic('crash.rewards', 6);
    topics.push(topic);
    const steps = 100;
    const trace = makeTrace({ campaignId, tasks: 2000, steps, duplicateRate: 0.05, seed: 2026 });
    expect(trace.groups.length).toBe(200_000);
    expect(trace.duplicates / trace.groups.length).toBeGreaterThan(0.045);
    const group = `crash-${campaignId}`;

    // Stream while crashing: the producer runs alongside the kill loop.
    // About 100 chunks over ~35 s, so that every kill lands while records are still arriving.
    let produced = 0;
    const producing = produceTrace(
      topic,
      trace.records.map((r) => encodeRecord(r, campaignId)),
      (n) => {
        produced = n;
      },
      350,
    );
    let kills = 0;
    let killedWhileStreaming = 0;
    for (let i = 0; i < 10; i++) {
      const child = startAggregator(topic, group);
      await sleep(2500 + Math.random() * 3500);
      await killHard(child);
      kills++;
      if (produced < trace.records.length) killedWhileStreaming++;
    }
    await producing;
    expect(kills).toBe(10);
    expect(killedWhileStreaming).toBeGreaterThanOrEqual(5);

    const last = startAggregator(topic, group);
    try {
      await waitForLastStep(campaignId, steps, 240_000);
    } finally {
      await killHard(last);
    }
    await expectEqualToReference(campaignId, trace);
  }, 900_000);

  it('two aggregators in one group, one killed and restarted mid-stream: statistics equal the offline reference', async () => {
    const campaignId = `rebal-${randomUUID().slice(0, 8)}`;
    await registerCampaign(pool, { campaignId });
    const topic = await freshRewardTopic('rebal.rewards', 6);
    topics.push(topic);
    const steps = 40;
    const trace = makeTrace({ campaignId, tasks: 1500, steps, duplicateRate: 0.05, seed: 7 });
    const group = `rebal-${campaignId}`;

    let produced = 0;
    const producing = produceTrace(
      topic,
      trace.records.map((r) => encodeRecord(r, campaignId)),
      (n) => {
        produced = n;
      },
      400,
    );
    const a = startAggregator(topic, group);
    let b = startAggregator(topic, group);
    await sleep(6000);
    // b dies mid-stream; a takes over its partitions after the session timeout, then b comes back
    // and the group rebalances again.
    await killHard(b);
    expect(produced).toBeLessThan(trace.records.length);
    // Some of b's work was committed before the kill (so a resumes from stored offsets).
    const before = await pool.query<{ n: number }>(
      'select coalesce(sum(groups), 0)::int as n from task_stats where campaign_id = $1',
      [campaignId],
    );
    expect(before.rows[0]!.n).toBeGreaterThan(0);
    await sleep(4000);
    b = startAggregator(topic, group);
    await producing;
    try {
      await waitForLastStep(campaignId, steps, 240_000);
    } finally {
      await killHard(a);
      await killHard(b);
    }
    await expectEqualToReference(campaignId, trace);
  }, 600_000);
});
