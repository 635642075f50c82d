// A long campaign at full size: N steps x T tasks x K rollouts (default 10,000 x 800 x 16 = 8M
// reward groups) through the real aggregator process (`rods aggregator`, its own process so its
// RSS is its own), the statistics and the replay, then the campaign workflow over enough steps to
// continue as new several times. Reports how the cost grows with the campaign's length:
// aggregator RSS early (1M groups) and at the end, the per-step aggregation cost of the first and
// the last 1,000 steps, event-store bytes per step, the replay's time and its ratio to a plain read
// of the same records, and each workflow run's history length.
//
// The records are generated and produced one chunk of steps at a time (never all in memory) and
// the topic is deleted afterwards, also on failure. By default the whole topic is produced before
// the aggregator starts, so it catches up in large batches; with --live each step is produced once
// the aggregator has applied the previous one, as in a campaign it keeps up with (one group per
// task per batch), and the aggregator's seconds include the production.
import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Client } from '@temporalio/client';
import type { temporal } from '@temporalio/proto';
import { eventIds } from '../../domain/ids.js';
import { openKafka, withAdmin } from '../../platform/kafka/client.js';
import { registerCampaign } from '../../platform/store/campaigns.js';
import { createPool, type Pool } from '../../platform/store/db.js';
import { migrate } from '../../platform/store/migrate.js';
import { statsMoments, type TaskMoments } from '../../platform/store/task-stats/view.js';
import { installWorkerRuntime } from '../../platform/temporal/connect.js';
import { freePort } from '../../platform/util/free-port.js';
import { encodeRecord, freshRewardTopic, rng, type TraceGroup } from '../../stages/aggregator/trace.js';
import { LoopHarness } from '../harness/loop.js';
import { type PrivateTemporal, startPrivateTemporal } from '../harness/private-temporal.js';
import { standinCampaign, standinEndpoints, startStandin } from '../harness/standin.js';
import type { BenchResult } from './result.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const PARTITIONS = 6;
/** Tables the aggregator writes for a campaign (the event store and the statistics). */
const TABLES = ['events', 'streams', 'task_stats', 'step_progress', 'steps', 'aggregator_offsets'] as const;

export interface ScaleOptions {
  steps: number;
  tasks: number;
  rollouts: number;
  /** Campaign workflow steps; undefined: until the workflow has run `workflowRuns` runs. */
  workflowSteps?: number;
  workflowRuns: number;
  /** Private Temporal dev server with this continue-as-new history threshold; undefined: the stack's server. */
  historyThreshold?: number;
  /** Share of groups sent a second time (a retrying producer) within their step. */
  duplicateRate: number;
  /** Steps generated and produced per chunk. */
  chunkSteps: number;
  /** Per-step cost windows (first and last W steps); default min(1000, steps / 4). */
  window?: number;
  /** Node/V8 flags for the aggregator process (e.g. --max-semi-space-size=64). */
  aggregatorNodeFlags: string[];
  /** The aggregator's --task-cache (undefined: its default). */
  taskCache?: number;
  /**
   * Produce one step at a time while the aggregator runs, each after the previous one is applied
   * (an aggregator that keeps up: small batches), instead of the whole topic before it starts.
   */
  live: boolean;
  quiet: boolean;
}

export function scaleOptions(opts: Record<string, string | boolean>): ScaleOptions {
  const num = (k: string, d: number | undefined): number | undefined => {
    const v = opts[k];
    if (v === undefined || v === true) return d;
    const n = Number(v);
    if (!Number.isFinite(n) || n < 0) throw new Error(`--${k} must be a non-negative number, got ${v}`);
    return n;
  };
  return {
    steps: num('steps', 10_000)!,
    tasks: num('tasks', 800)!,
    rollouts: num('rollouts', 16)!,
    workflowSteps: num('workflow-steps', undefined),
    workflowRuns: num('workflow-runs', 3)!,
    historyThreshold: num('history-threshold', undefined),
    duplicateRate: num('duplicate-rate', 0.001)!,
    chunkSteps: num('chunk-steps', 25)!,
    window: num('window', undefined),
    aggregatorNodeFlags:
      typeof opts['aggregator-node-flags'] === 'string'
        ? opts['aggregator-node-flags'].split(/\s+/).filter(Boolean)
        : [],
    taskCache: num('task-cache', undefined),
    live: Boolean(opts.live),
    quiet: Boolean(opts.json),
  };
}

export default async function scaleBench(opts: Record<string, string | boolean>): Promise<BenchResult> {
  // Arrays and nulls are JSON too; BenchResult's figures only name the top level's kinds.
  return (await runScale(scaleOptions(opts))) as unknown as BenchResult;
}

interface RssSample {
  at: number;
  applied: number;
  rss: number;
  /** V8 heap in use and memory outside it (Buffers: fetched record batches), from the metrics. */
  heapUsed: number;
  external: number;
  /** rods_aggregator_batch_phase_seconds_total by phase (summed over partitions), cumulative. */
  phases: Record<string, number>;
}

export type ScaleResult = Awaited<ReturnType<typeof runScale>>;

export async function runScale(o: ScaleOptions) {
  const log = (m: string) => o.quiet || process.stderr.write(`${m}\n`);
  const total = o.steps * o.tasks;
  const early = Math.min(1_000_000, Math.floor(total / 8));
  const window = Math.max(2, Math.min(o.window ?? 1000, Math.floor(o.steps / 4)));
  await migrate();
  const pool = createPool({ application: 'rods-bench-scale', max: 4 });
  const campaignId = `bench-scale-${randomUUID().slice(0, 8)}`;
  let topic = '';
  let child: ChildProcess | undefined;
  try {
    // The default config; the replay folds with the same one.
    const config = {};
    await registerCampaign(pool, { campaignId, config });
    const sizesBefore = await tableSizes(pool);
    topic = await freshRewardTopic('bench.scale', PARTITIONS);

    // The aggregator, as its own process: started after the records are produced, or before them
    // in live mode.
    const metricsPort = await freePort();
    let stderr = '';
    const spawnAggregator = () => {
      child = spawn(
        process.execPath,
        [
          ...o.aggregatorNodeFlags,
          path.join(ROOT, 'bin/rods.mjs'),
          'aggregator',
          '--group',
          `bench-scale-${campaignId}`,
          '--topic',
          topic,
          '--metrics-port',
          String(metricsPort),
          ...(o.taskCache === undefined ? [] : ['--task-cache', String(o.taskCache)]),
        ],
        { cwd: ROOT, env: { ...process.env, RODS_LOG_LEVEL: 'warn' }, stdio: ['ignore', 'ignore', 'pipe'] },
      );
      child.stderr!.on('data', (d) => {
        stderr = (stderr + d).slice(-4000);
      });
      return child;
    };
    const samples: RssSample[] = [];
    let earlySample: RssSample | undefined;
    let applied = 0;
    const takeSample = async (pid: number): Promise<RssSample> => {
      if (child?.exitCode !== null) throw new Error(`the aggregator exited (${child?.exitCode}): ${stderr}`);
      const m = await scrape(metricsPort);
      applied = m.applied;
      const sample = {
        at: Date.now(),
        applied,
        rss: vmRss(pid),
        heapUsed: m.heapUsed,
        external: m.external,
        phases: m.phases,
      };
      samples.push(sample);
      if (!earlySample && applied >= early) earlySample = sample;
      return sample;
    };

    // 1. The records, produced one chunk of steps at a time (live: one step, once the aggregator
    // has applied the previous ones).
    let t0 = Date.now();
    let paced: ((groups: number) => Promise<void>) | undefined;
    if (o.live) {
      const pid = spawnAggregator().pid!;
      let lastSample = 0;
      paced = async (groups) => {
        const deadline = Date.now() + 300_000;
        for (;;) {
          if (Date.now() - lastSample >= 1000) {
            lastSample = Date.now();
            await takeSample(pid);
          } else applied = (await scrape(metricsPort)).applied;
          if (applied >= groups) return;
          if (Date.now() > deadline)
            throw new Error(
              `the aggregator applied no more than ${applied} of ${groups} groups in 5 minutes: ${stderr}`,
            );
          await new Promise((r) => setTimeout(r, 5));
        }
      };
    }
    const tp = performance.now();
    const produced = await produceCampaign(topic, campaignId, o, log, paced);
    const produceSeconds = (performance.now() - tp) / 1000;
    log(`produced ${produced.records} records in ${produceSeconds.toFixed(1)} s`);

    // 2. The aggregator, until every step is closed.
    if (!o.live) {
      spawnAggregator();
      t0 = Date.now();
    }
    const pid = child!.pid!;
    let lastProgress = { at: Date.now(), applied: 0 };
    for (;;) {
      const sample = await takeSample(pid);
      const closed = await one(
        pool,
        'select count(*)::int as n from steps where campaign_id = $1 and closed_at is not null',
        [campaignId],
      );
      if (closed >= o.steps && applied >= total) break;
      if (applied > lastProgress.applied) lastProgress = { at: Date.now(), applied };
      else if (Date.now() - lastProgress.at > 300_000)
        throw new Error(`the aggregator made no progress for 5 minutes at ${applied} groups: ${stderr}`);
      log(
        `aggregator: ${applied} / ${total} groups applied, ${closed} / ${o.steps} steps closed, RSS ${mib(sample.rss)} MiB, heap ${mib(sample.heapUsed)} MiB, external ${mib(sample.external)} MiB`,
      );
      await new Promise((r) => setTimeout(r, 1000));
    }
    const aggSeconds = (Date.now() - t0) / 1000;
    const last = await scrape(metricsPort);
    const finalSample: RssSample = {
      at: Date.now(),
      applied,
      rss: vmRss(pid),
      heapUsed: last.heapUsed,
      external: last.external,
      phases: last.phases,
    };
    samples.push(finalSample);
    const earlyWindow = samples.filter((s) => s.applied > early / 2 && s.applied <= early * 1.5);
    // Not the samples after the last group, while the last steps close and the process idles.
    const finalWindow = samples.filter(
      (s) => s.applied > total - early && (s.applied < total || s === finalSample),
    );
    const medianOf = (xs: RssSample[], k: 'heapUsed' | 'external') => median(xs.map((s) => s[k])) ?? null;
    const minOf = (xs: RssSample[]) => (xs.length ? Math.min(...xs.map((s) => s.heapUsed)) : null);
    // RSS swings with each batch and collection (hundreds of MiB at full size): compare the
    // medians of the samples around the milestone and over the last stretch of the same width.
    const earlyMedian = median(earlyWindow.map((s) => s.rss)) ?? earlySample?.rss;
    const finalMedian = median(finalWindow.map((s) => s.rss)) ?? finalSample.rss;
    const peakRss = vmHwm(pid);
    const outcomes = await scrape(metricsPort);
    await stopChild(child!);
    child = undefined;

    // 3. The statistics: every group applied exactly once.
    const statRows = await statsMoments(pool, campaignId);
    const statGroups = statRows.reduce((a, r) => a + r.groups, 0);
    const statRollouts = statRows.reduce((a, r) => a + r.rollouts, 0);
    const progressApplied = await one(
      pool,
      'select coalesce(sum(groups_applied), 0)::float8 as n from step_progress where campaign_id = $1',
      [campaignId],
    );
    const costs = await stepCosts(pool, campaignId, o.steps, window);

    // 4. The event store's growth.
    const sizesAfter = await tableSizes(pool);
    const tableBytesPerStep = Object.fromEntries(
      TABLES.map((t) => [t, Math.round((sizesAfter[t]! - sizesBefore[t]!) / o.steps)]),
    );
    const { rows: evRows } = await pool.query<{ type: string; n: number; bytes: number; entries: number }>(
      `select type, count(*)::int as n, sum(pg_column_size(e.*))::float8 as bytes,
              sum(case when type = 'StepStatsRecorded' then jsonb_array_length(payload->'tasks'->'taskId') end)::float8 as entries
         from events e where payload->>'campaignId' = $1 group by type order by type`,
      [campaignId],
    );
    const eventRowBytes = evRows.reduce((a, r) => a + r.bytes, 0);
    const eventCount = evRows.reduce((a, r) => a + r.n, 0);
    // The table's index bytes per row, to add the campaign's share of the indexes.
    const indexBytesPerEvent = await one(
      pool,
      `select pg_indexes_size('events')::float8 / greatest(1, reltuples)::float8 as n from pg_class where oid = 'events'::regclass`,
      [],
    );

    // 5. Replay at full size, in its own process (it holds every group at once).
    log('replaying the campaign from the topic ...');
    const replay = await runReplay(topic, campaignId, config);
    const replayMismatch = compareStats(statRows, replay.states);

    // 6. The campaign workflow's history per run under continue-as-new.
    const wf = await workflowHistories(o, log);

    const growth = earlyMedian ? finalMedian / earlyMedian - 1 : null;
    return {
      steps: o.steps,
      tasks: o.tasks,
      rollouts: o.rollouts,
      groups: total,
      records: produced.records,
      duplicates_sent: produced.duplicates,
      produce_seconds: round(produceSeconds, 1),
      aggregator: {
        node_flags: o.aggregatorNodeFlags,
        seconds: round(aggSeconds, 1),
        groups_per_s: Math.round(total / aggSeconds),
        applied: outcomes.applied,
        duplicate: outcomes.duplicate,
        rejected: outcomes.rejected,
      },
      rss: {
        early_groups: earlySample?.applied ?? null,
        early_bytes: earlySample?.rss ?? null,
        final_groups: finalSample.applied,
        final_bytes: finalSample.rss,
        early_median_bytes: earlyMedian ?? null,
        final_median_bytes: finalMedian,
        peak_bytes: peakRss,
        growth: growth === null ? null : round(growth, 3),
        samples: samples.length,
        heap_used_median_bytes: [medianOf(earlyWindow, 'heapUsed'), medianOf(finalWindow, 'heapUsed')],
        // The lowest heap in use of each window: near the live set after a collection (a leak raises it).
        heap_used_min_bytes: [minOf(earlyWindow), minOf(finalWindow)],
        external_median_bytes: [medianOf(earlyWindow, 'external'), medianOf(finalWindow, 'external')],
        // A coarse series (10 points): applied groups and RSS.
        series: thin(samples, 10).map((s) => [s.applied, s.rss]),
      },
      step_cost: {
        ...costs,
        ...appliedCosts(samples, o.tasks, total, window),
        phase_ms_per_step: phaseCosts(samples, o.tasks, total, window),
      },
      statistics: {
        tasks: statRows.length,
        groups: statGroups,
        rollouts: statRollouts,
        step_progress_applied: progressApplied,
        exactly_once:
          statGroups === total && progressApplied === total && statRollouts === total * o.rollouts,
      },
      event_store: {
        bytes_per_step: Math.round(
          TABLES.reduce((a, t) => a + (sizesAfter[t]! - sizesBefore[t]!), 0) / o.steps,
        ),
        table_bytes_per_step: tableBytesPerStep,
        campaign_event_row_bytes_per_step: Math.round(eventRowBytes / o.steps),
        campaign_event_bytes_per_step_with_indexes: Math.round(
          (eventRowBytes + eventCount * indexBytesPerEvent) / o.steps,
        ),
        campaign_events: Object.fromEntries(evRows.map((r) => [r.type, r.n])),
        // Task entries over the per-step statistics records: one per task and step a batch applied.
        step_stats_entries: evRows.find((r) => r.type === 'StepStatsRecorded')?.entries ?? 0,
      },
      replay: {
        records: replay.records,
        folded: replay.folded,
        seconds: round(replay.replay_seconds, 2),
        raw_read_seconds: round(replay.raw_seconds, 2),
        events_per_s: Math.round(replay.records / replay.replay_seconds),
        raw_read_events_per_s: Math.round(replay.records / replay.raw_seconds),
        ratio: round(replay.raw_seconds / replay.replay_seconds, 3),
        rss_bytes: replay.rss_bytes,
        tasks: replay.states.length,
        mismatched_tasks: replayMismatch,
        stats_match: replayMismatch === 0 && replay.states.length === statRows.length,
      },
      workflow: wf,
    };
  } finally {
    if (child) await stopChild(child);
    if (topic) await withAdmin((a) => a.deleteTopics([topic])).catch(() => {});
    await pool.end();
  }
}

/** Generates and produces the campaign one chunk of steps at a time. */
async function produceCampaign(
  topic: string,
  campaignId: string,
  o: ScaleOptions,
  log: (m: string) => void,
  /** Live mode: called after each step is sent, with the groups sent so far; chunks are one step. */
  paced?: (groups: number) => Promise<void>,
): Promise<{ records: number; duplicates: number }> {
  const chunkSteps = paced ? 1 : o.chunkSteps;
  const seed = 7;
  const rand = rng(seed);
  const base = Array.from({ length: o.tasks }, () => rand());
  const producer = await openKafka({ clientId: 'rods-bench-scale' }).producer({ idempotent: true });
  let records = 0;
  let duplicates = 0;
  let lastLog = 0;
  try {
    for (let from = 1; from <= o.steps; from += chunkSteps) {
      const chunk: { key: string; value: Buffer }[] = [];
      for (let step = from; step < Math.min(o.steps + 1, from + chunkSteps); step++) {
        const resend: { key: string; value: Buffer }[] = [];
        for (let t = 0; t < o.tasks; t++) {
          // As makeTrace: a latent success rate drifting up, progress rewards in sixteenths.
          const p = Math.min(1, base[t]! + (step / o.steps) * 0.3 * rand());
          const rewards = Array.from({ length: o.rollouts }, () =>
            rand() < p ? (rand() < 0.5 ? 1 : Math.floor(rand() * 16) / 16) : 0,
          );
          const group: TraceGroup = {
            eventId: eventIds.traceRolloutGroup(campaignId, seed, step, t),
            campaignId,
            taskId: `task-${String(t).padStart(5, '0')}`,
            step,
            rewards,
          };
          const rec = encodeRecord({ kind: 'group', group }, campaignId);
          chunk.push(rec);
          if (rand() < o.duplicateRate) resend.push(rec);
        }
        // A retrying producer sends a few groups again, later in the same step.
        chunk.push(...resend);
        duplicates += resend.length;
        chunk.push(encodeRecord({ kind: 'close', step, groupCount: o.tasks }, campaignId));
      }
      for (let i = 0; i < chunk.length; i += 4000) await producer.send(topic, chunk.slice(i, i + 4000));
      records += chunk.length;
      await paced?.(Math.min(o.steps, from + chunkSteps - 1) * o.tasks);
      if (Date.now() - lastLog > 2000) {
        lastLog = Date.now();
        log(`produced ${records} records (step ${Math.min(o.steps, from + chunkSteps - 1)} / ${o.steps})`);
      }
    }
  } finally {
    await producer.disconnect();
  }
  return { records, duplicates };
}

interface ReplayState {
  taskId: string;
  groups: number;
  rollouts: number;
  mean: number;
  m2: number;
  band: string;
  lastStep: number;
}

/** Tasks whose replayed statistics differ from the aggregator's (or exist on one side only). */
export function compareStats(rows: TaskMoments[], states: ReplayState[]): number {
  const byTask = new Map(states.map((s) => [s.taskId, s]));
  const close = (a: number, b: number) => Math.abs(a - b) <= 1e-9 * Math.max(1, Math.abs(a), Math.abs(b));
  let bad = Math.abs(states.length - rows.length);
  for (const r of rows) {
    const s = byTask.get(r.task_id);
    if (
      !s ||
      s.groups !== r.groups ||
      s.rollouts !== r.rollouts ||
      s.band !== r.band ||
      s.lastStep !== r.last_step ||
      !close(s.mean, r.mean) ||
      !close(s.m2, r.m2)
    )
      bad++;
  }
  return bad;
}

/** Per-step aggregation cost (seconds between step closings) of the first and last `window` steps, and by decile. */
async function stepCosts(pool: Pool, campaignId: string, steps: number, window: number) {
  const { rows } = await pool.query<{ step: number; t: number }>(
    `select step::int as step, extract(epoch from closed_at)::float8 as t
       from steps where campaign_id = $1 and closed_at is not null order by step`,
    [campaignId],
  );
  const t = rows.map((r) => r.t);
  // Seconds per step over steps [a, b) (0-based), from the spread of their closing times.
  const perStep = (a: number, b: number) => {
    const span = t.slice(a, b);
    return (Math.max(...span) - Math.min(...span)) / Math.max(1, span.length - 1);
  };
  const first = perStep(0, window);
  const last = perStep(t.length - window, t.length);
  const deciles = Array.from({ length: 10 }, (_, i) =>
    round(perStep(Math.floor((i * t.length) / 10), Math.floor(((i + 1) * t.length) / 10)) * 1000, 2),
  );
  return {
    window,
    steps_closed: rows.length,
    first_ms: round(first * 1000, 2),
    last_ms: round(last * 1000, 2),
    last_over_first: round(last / first, 3),
    by_decile_ms: deciles,
    total_steps: steps,
  };
}

/**
 * The same windows from the applied-groups progress (the samples' times, interpolated): steps
 * close after their groups are applied, so closing times also carry the closing's own pace.
 */
function appliedCosts(samples: RssSample[], tasks: number, total: number, window: number) {
  // When `g` groups had been applied (linear between the samples around it).
  const at = (g: number) => {
    const i = samples.findIndex((s) => s.applied >= g);
    if (i <= 0) return samples[Math.max(0, i)]!.at;
    const a = samples[i - 1]!;
    const b = samples[i]!;
    return a.at + ((b.at - a.at) * (g - a.applied)) / Math.max(1, b.applied - a.applied);
  };
  const first = (at(window * tasks) - at(tasks)) / (window - 1);
  const last = (at(total) - at(total - (window - 1) * tasks)) / (window - 1);
  return {
    applied_first_ms: round(first, 2),
    applied_last_ms: round(last, 2),
    applied_last_over_first: first > 0 ? round(last / first, 3) : null,
  };
}

/**
 * Where a step's batch time went early and late: the batches' phase seconds (the aggregator's
 * rods_aggregator_batch_phase_seconds_total, summed over its partitions) per step over the
 * first and the last `window` steps' worth of applied groups. A phase that grows with the
 * campaign (say, the events' appends as the event_id index outgrows the cache) shows here.
 */
function phaseCosts(samples: RssSample[], tasks: number, total: number, window: number) {
  const firstAt = (g: number) => samples.find((s) => s.applied >= g) ?? samples[samples.length - 1]!;
  const perStep = (a: RssSample, b: RssSample) => {
    const steps = Math.max(1, (b.applied - a.applied) / tasks);
    return Object.fromEntries(
      Object.keys(b.phases)
        .sort()
        .map((k) => [k, round(((b.phases[k]! - (a.phases[k] ?? 0)) * 1000) / steps, 2)]),
    );
  };
  const start: RssSample = { at: 0, applied: 0, rss: 0, heapUsed: 0, external: 0, phases: {} };
  const end = samples[samples.length - 1]!;
  return {
    first: perStep(start, firstAt(window * tasks)),
    last: perStep(firstAt(total - window * tasks), end),
  };
}

async function tableSizes(pool: Pool): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const t of TABLES)
    out[t] = await one(pool, 'select pg_total_relation_size($1::regclass)::float8 as n', [t]);
  return out;
}

async function one(pool: Pool, sql: string, args: unknown[]): Promise<number> {
  return Number((await pool.query<{ n: number }>(sql, args)).rows[0]!.n);
}

/** The aggregator's event counters from its metrics endpoint. */
async function scrape(port: number): Promise<{
  applied: number;
  duplicate: number;
  rejected: number;
  heapUsed: number;
  external: number;
  phases: Record<string, number>;
}> {
  const out = {
    applied: 0,
    duplicate: 0,
    rejected: 0,
    heapUsed: 0,
    external: 0,
    phases: {} as Record<string, number>,
  };
  let text = '';
  try {
    text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  } catch {
    return out; // not serving yet
  }
  for (const m of text.matchAll(/^rods_aggregator_events_total\{outcome="(\w+)"\} (\S+)$/gm)) {
    const outcome = m[1] as 'applied' | 'duplicate' | 'rejected';
    if (outcome === 'applied' || outcome === 'duplicate' || outcome === 'rejected')
      out[outcome] = Number(m[2]);
  }
  for (const m of text.matchAll(
    /^rods_aggregator_batch_phase_seconds_total\{[^}]*phase="(\w+)"[^}]*\} (\S+)$/gm,
  ))
    out.phases[m[1]!] = (out.phases[m[1]!] ?? 0) + Number(m[2]);
  out.heapUsed = Number(text.match(/^nodejs_heap_size_used_bytes (\S+)$/m)?.[1] ?? 0);
  out.external = Number(text.match(/^nodejs_external_memory_bytes (\S+)$/m)?.[1] ?? 0);
  return out;
}

function procStatus(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  const m = readFileSync(`/proc/${pid}/status`, 'utf8').match(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm'));
  return m ? Number(m[1]) * 1024 : 0;
}
const vmRss = (pid: number) => procStatus(pid, 'VmRSS');
const vmHwm = (pid: number) => procStatus(pid, 'VmHWM');

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
  await exited;
  clearTimeout(timer);
}

interface ReplayOut {
  records: number;
  folded: number;
  raw_seconds: number;
  replay_seconds: number;
  rss_bytes: number;
  states: ReplayState[];
}

async function runReplay(topic: string, campaignId: string, config: unknown): Promise<ReplayOut> {
  const child = spawn(
    process.execPath,
    [
      '--max-old-space-size=12288',
      '--import',
      'tsx',
      path.join(ROOT, 'dev/bench/scale-replay.ts'),
      topic,
      campaignId,
      JSON.stringify(config),
    ],
    { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d) => {
    stdout += d;
  });
  child.stderr!.on('data', (d) => {
    stderr = (stderr + d).slice(-4000);
  });
  const code = await new Promise<number | null>((r) => child.once('exit', (c) => r(c)));
  if (code !== 0) throw new Error(`the replay process exited with ${code}: ${stderr}`);
  return JSON.parse(stdout) as ReplayOut;
}

function median(xs: number[]): number | undefined {
  if (xs.length === 0) return undefined;
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

/** Every 1/n-th sample (and the last). */
function thin<T>(xs: T[], n: number): T[] {
  if (xs.length <= n) return xs;
  return Array.from({ length: n }, (_, i) => xs[Math.round(((i + 1) * (xs.length - 1)) / n)]!);
}

const round = (x: number, d: number) => Number(x.toFixed(d));
const mib = (b: number) => (b / 2 ** 20).toFixed(0);

// ---------------------------------------------------------------------------------------------
// The campaign workflow under continue-as-new.

type HistoryEvent = temporal.api.history.v1.IHistoryEvent;

export interface WorkflowRun {
  run_id: string;
  history_events: number;
  first_step: number;
  steps: number;
  continued_as_new: boolean;
}

/**
 * Runs the real campaign workflow (stand-in generator, one synthesis slot, the loop harness's
 * simulated trainer and in-process aggregator) for `workflowSteps` steps, or until it has run
 * `workflowRuns` runs, and reads each run's history back from Temporal.
 */
async function workflowHistories(o: ScaleOptions, log: (m: string) => void) {
  let server: PrivateTemporal | undefined;
  let standin: Awaited<ReturnType<typeof startStandin>> | undefined;
  let loop: LoopHarness | undefined;
  try {
    if (o.historyThreshold !== undefined)
      server = await startPrivateTemporal({ suggestContinueAsNewAt: o.historyThreshold });
    await installWorkerRuntime('WARN');
    standin = await startStandin(['--seed', '11']);
    loop = new LoopHarness({
      endpoints: standinEndpoints(standin.url),
      // Minimal synthesis: one seed a step at most, one synthesis at a time.
      config: standinCampaign(3, { base: 1 }, { selection: { minGroups: 1 } }),
    });
    log('campaign workflow: bundling and starting ...');
    await loop.start();
    const t0 = performance.now();
    let step = 0;
    let generation = 0;
    // Without --workflow-steps: until the runs are there (a cap in case the server never suggests it).
    const cap = o.workflowSteps ?? 5000;
    while (step < cap && (o.workflowSteps !== undefined || generation < o.workflowRuns - 1)) {
      step++;
      await loop.trainStep(step);
      generation = (await loop.waitPlanned(step)).generation;
      if (step % 50 === 0) log(`campaign workflow: step ${step}, run ${generation + 1}`);
    }
    const seconds = (performance.now() - t0) / 1000;
    const runs = await runHistories(loop.client, loop.workflowId, step);
    const longest = Math.max(...runs.map((r) => r.history_events));
    return {
      workflow_steps: step,
      seconds: round(seconds, 1),
      history_threshold: o.historyThreshold ?? 'server default',
      runs: runs.length,
      longest_run_history_events: longest,
      run_history_events: runs.map((r) => r.history_events),
      run_steps: runs.map((r) => r.steps),
      continued_as_new_runs: runs.filter((r) => r.continued_as_new).length,
      events_per_step: round(
        runs.reduce((a, r) => a + r.history_events, 0) /
          Math.max(
            1,
            runs.reduce((a, r) => a + r.steps, 0),
          ),
        1,
      ),
    };
  } finally {
    await loop?.close().catch(() => {});
    await standin?.stop();
    await server?.stop();
  }
}

/** The runs of one workflow id, oldest first, followed back through continuedExecutionRunId. */
async function runHistories(client: Client, workflowId: string, lastStep: number): Promise<WorkflowRun[]> {
  const runs: WorkflowRun[] = [];
  let runId: string | undefined = (await client.workflow.getHandle(workflowId).describe()).runId;
  let nextFirst = lastStep + 1;
  while (runId) {
    const history: { events?: HistoryEvent[] | null } = await client.workflow
      .getHandle(workflowId, runId)
      .fetchHistory();
    const events: HistoryEvent[] = history.events ?? [];
    const started = events[0]?.workflowExecutionStartedEventAttributes;
    const payload = started?.input?.payloads?.[0]?.data;
    const input = payload
      ? (JSON.parse(Buffer.from(payload).toString('utf8')) as { carry?: { step?: number } })
      : {};
    const first = (input.carry?.step ?? 0) + 1;
    runs.unshift({
      run_id: runId,
      history_events: events.length,
      first_step: first,
      steps: nextFirst - first,
      continued_as_new: events.at(-1)?.workflowExecutionContinuedAsNewEventAttributes != null,
    });
    nextFirst = first;
    runId = started?.continuedExecutionRunId || undefined;
  }
  return runs;
}
