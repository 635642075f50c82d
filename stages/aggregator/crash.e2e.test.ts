// Real crashes: aggregator processes killed with SIGKILL while rewards stream in, each kill once
// the process has committed a batch (seen in aggregator_offsets), after a seeded pause.
// Afterwards the statistics must equal an offline reference of the same trace: identical counts,
// mean and variance within 1e-12 relative.
import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { afterAll, describe, expect, it } from 'vitest';
import { decode } from '../../platform/codec/registry.js';
import { readToEnd, withAdmin } from '../../platform/kafka/client.js';
import { DLQ_TOPIC } from '../../platform/kafka/dlq.js';
import { registerCampaign } from '../../platform/store/campaigns.js';
import { createPool } from '../../platform/store/db.js';
import { watermark } from '../../platform/store/steps/watermark.js';
import { queryStats } from '../../platform/store/task-stats/view.js';
import { freePort } from '../../platform/util/free-port.js';
import { ROOT } from '../../test/support/sources.js';
import { encodeRecord, freshRewardTopic, makeTrace, produceTrace, referenceStats, rng } from './trace.js';

const pool = createPool({ application: 'rods-crash-test', max: 4 });
const topics: string[] = [];
const children = new Set<ChildProcess>();
let stderrTail = '';

afterAll(async () => {
  for (const c of children) c.kill('SIGKILL');
  if (topics.length) await withAdmin((a) => a.deleteTopics(topics));
  await pool.end();
});

interface Aggregator {
  child: ChildProcess;
  /** The partitions of its latest assignment (empty until it joined the group). */
  assigned: number[];
  metricsPort?: number;
}

/** A `rods aggregator` process; with a metrics port it also logs its assignments (info level). */
function startAggregator(topic: string, group: string, metricsPort?: number): Aggregator {
  const args = [path.join(ROOT, 'bin/rods.mjs'), 'aggregator', '--topic', topic, '--group', group];
  args.push('--session-timeout-ms', '6000');
  if (metricsPort !== undefined) args.push('--metrics-port', String(metricsPort));
  const child = spawn(process.execPath, args, {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, RODS_LOG_LEVEL: metricsPort === undefined ? 'warn' : 'info' },
  });
  const agg: Aggregator = { child, assigned: [], metricsPort };
  child.stderr!.on('data', (d: Buffer) => {
    stderrTail = (stderrTail + d.toString()).slice(-4000);
  });
  createInterface({ input: child.stdout! }).on('line', (line) => {
    if (!line.includes('partitions assigned')) return;
    try {
      agg.assigned = (JSON.parse(line) as { partitions: number[] }).partitions;
    } catch {
      // not a log record
    }
  });
  children.add(child);
  child.once('exit', () => children.delete(child));
  return agg;
}

function killHard(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    child.once('exit', () => resolve());
    child.kill('SIGKILL');
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls until `holds` answers true; fails at the deadline, or at once if a watched process died. */
async function waitFor(
  what: string,
  holds: () => Promise<boolean> | boolean,
  opts: { timeoutMs?: number; alive?: ChildProcess[] } = {},
): Promise<void> {
  const deadline = Date.now() + (opts.timeoutMs ?? 120_000);
  for (;;) {
    if (await holds()) return;
    const dead = opts.alive?.find((c) => c.exitCode !== null || c.signalCode !== null);
    if (dead) throw new Error(`waiting for ${what}: aggregator exited (${dead.exitCode})\n${stderrTail}`);
    if (Date.now() > deadline) throw new Error(`gave up waiting for ${what}\n${stderrTail}`);
    await sleep(100);
  }
}

/** PostgreSQL's clock, as text (microseconds kept): the commit marks below are compared to it. */
async function dbNow(): Promise<string> {
  const { rows } = await pool.query<{ t: string }>('select clock_timestamp()::text as t');
  return rows[0]!.t;
}

/**
 * The partitions whose stored offset a transaction that started after `since` moved: each batch
 * stores its partition's next offset with the state, in the same transaction (updated_at = now()).
 */
async function partitionsCommittedSince(group: string, topic: string, since: string): Promise<number[]> {
  const { rows } = await pool.query<{ partition: number }>(
    `select partition from aggregator_offsets
      where group_id = $1 and topic = $2 and updated_at > $3::timestamptz order by partition`,
    [group, topic, since],
  );
  return rows.map((r) => r.partition);
}

/** Groups a process applied (its own counter: committed batches only). */
async function appliedBy(agg: Aggregator): Promise<number> {
  try {
    const text = await (await fetch(`http://127.0.0.1:${agg.metricsPort}/metrics`)).text();
    return Number(/rods_aggregator_events_total\{outcome="applied"\} (\d+)/.exec(text)?.[1] ?? 0);
  } catch {
    return 0; // not serving yet
  }
}

/** Records to produce in slices; slice k goes out once release(k) was called (0 at once). */
function gatedProducer(
  topic: string,
  records: { key: string; value: Buffer }[],
  slices: number,
  paceMs: number,
) {
  const size = Math.ceil(records.length / slices);
  const gates = Array.from({ length: slices }, () => {
    let open = () => {};
    const opened = new Promise<void>((r) => {
      open = r;
    });
    return { open, opened };
  });
  const state = { produced: 0 };
  gates[0]!.open();
  const done = (async () => {
    for (let k = 0; k < slices; k++) {
      await gates[k]!.opened;
      await produceTrace(
        topic,
        records.slice(k * size, (k + 1) * size),
        (n) => {
          state.produced = k * size + n;
        },
        paceMs,
      );
    }
  })();
  done.catch(() => {}); // awaited by the test; a failure must not go unhandled meanwhile
  return {
    state,
    done,
    complete: () => state.produced >= records.length,
    release: (k: number) => gates[k]?.open(),
  };
}

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

/**
 * The tasks of the records dead-lettered as reader-crashed, with how many each: a kill -9 from
 * outside counts as a crash (the aggregator cannot tell it from a record that kills its reader),
 * so two kills landing while one record is folded alone put it on the DLQ, with its bytes.
 */
async function readerCrashed(topic: string): Promise<Map<string, number>> {
  const tasks = new Map<string, number>();
  await readToEnd(DLQ_TOPIC, (records) => {
    for (const r of records) {
      const d = decode(r.value!);
      if (d.name !== 'DeadLettered' || d.payload.sourceTopic !== topic) continue;
      if (d.payload.reasonCode !== 'reader-crashed') continue;
      const g = decode(d.payload.value as Buffer);
      const taskId = (g.payload as { taskId: string }).taskId;
      tasks.set(taskId, (tasks.get(taskId) ?? 0) + 1);
    }
  });
  return tasks;
}

async function expectEqualToReference(
  campaignId: string,
  trace: ReturnType<typeof makeTrace>,
  deadLettered: ReadonlyMap<string, number> = new Map(),
): Promise<void> {
  const ref = referenceStats(trace.groups);
  const rows = await queryStats(pool, { campaignId });
  expect(rows.length).toBe(ref.size);
  let worstMean = 0;
  let worstVar = 0;
  for (const r of rows) {
    const e = ref.get(r.taskId)!;
    const k = deadLettered.get(r.taskId) ?? 0;
    if (k > 0) {
      // A dead-lettered group is not counted (unless a duplicate of it came later): on the DLQ, not lost.
      expect(r.groups).toBeGreaterThanOrEqual(e.groups - k);
      expect(r.groups).toBeLessThanOrEqual(e.groups);
      continue;
    }
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
  it('10 kill -9, each after the process committed a batch, while streaming 200,000 groups of 16 with 5 % duplicates: statistics equal the offline reference', async () => {
    const campaignId = `crash-${randomUUID().slice(0, 8)}`;
    await registerCampaign(pool, { campaignId });
    const topic = await freshRewardTopic('crash.rewards', 6);
    topics.push(topic);
    const steps = 100;
    const trace = makeTrace({ campaignId, tasks: 2000, steps, duplicateRate: 0.05, seed: 2026 });
    expect(trace.groups.length).toBe(200_000);
    expect(trace.duplicates / trace.groups.length).toBeGreaterThan(0.045);
    const group = `crash-${campaignId}`;
    const pause = rng(2026);

    // Slice k + 1 of the trace goes out after kill k: every kill lands while records are still to come.
    const records = trace.records.map((r) => encodeRecord(r, campaignId));
    const producer = gatedProducer(topic, records, 11, 350);
    let kills = 0;
    let killedWhileStreaming = 0;
    for (let i = 0; i < 10; i++) {
      const since = await dbNow();
      const agg = startAggregator(topic, group);
      await waitFor(
        `aggregator ${i + 1} to commit a batch`,
        async () => (await partitionsCommittedSince(group, topic, since)).length > 0,
        { alive: [agg.child] },
      );
      // A seeded pause, so that the kill lands at another point of the batch cycle each time.
      await sleep(Math.floor(pause() * 1500));
      const streaming = !producer.complete();
      await killHard(agg.child);
      kills++;
      if (streaming) killedWhileStreaming++;
      producer.release(i + 1);
    }
    await producer.done;
    expect(kills).toBe(10);
    expect(killedWhileStreaming).toBe(10);

    const last = startAggregator(topic, group);
    try {
      await waitForLastStep(campaignId, steps, 240_000);
    } finally {
      await killHard(last.child);
    }
    const crashed = await readerCrashed(topic);
    // Each such dead letter takes two kills landing on one record folded alone.
    expect([...crashed.values()].reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(kills / 2);
    await expectEqualToReference(campaignId, trace, crashed);
  }, 900_000);

  it('two aggregators in one group, one killed after it committed work and restarted: statistics equal the offline reference', async () => {
    const campaignId = `rebal-${randomUUID().slice(0, 8)}`;
    await registerCampaign(pool, { campaignId });
    const topic = await freshRewardTopic('rebal.rewards', 6);
    topics.push(topic);
    const steps = 40;
    const trace = makeTrace({ campaignId, tasks: 1500, steps, duplicateRate: 0.05, seed: 7 });
    const group = `rebal-${campaignId}`;

    // Three slices: the first at once, the second once b holds partitions (so b has records of its
    // own to apply), the third once b is dead (records for every partition after the kill).
    const producer = gatedProducer(
      topic,
      trace.records.map((r) => encodeRecord(r, campaignId)),
      3,
      400,
    );
    const a = startAggregator(topic, group, await freePort());
    let b = startAggregator(topic, group, await freePort());
    await waitFor('b to be assigned partitions', () => b.assigned.length > 0, { alive: [a.child, b.child] });
    producer.release(1);
    // b dies once it applied (and committed) groups itself, so a resumes b's partitions from the
    // offsets b stored.
    await waitFor('b to apply groups', async () => (await appliedBy(b)) > 0, { alive: [a.child, b.child] });
    const killedAt = await dbNow();
    await killHard(b.child);
    expect(producer.complete()).toBe(false);
    producer.release(2);
    // a takes over b's partitions after the session timeout: every partition commits again.
    await waitFor(
      'a to apply on every partition after the kill',
      async () => (await partitionsCommittedSince(group, topic, killedAt)).length === 6,
      { alive: [a.child] },
    );
    // b comes back and the group rebalances again.
    b = startAggregator(topic, group);
    await producer.done;
    try {
      await waitForLastStep(campaignId, steps, 240_000);
    } finally {
      await killHard(a.child);
      await killHard(b.child);
    }
    await expectEqualToReference(campaignId, trace);
  }, 600_000);
});
