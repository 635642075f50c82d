// `npm run bench -- long-campaign --json [--steps 10000] [--tasks 800] [--early 100] [--window 10]
// [--repeats 5]`: does a step cost the same at step 10,000 of a campaign as at step 100?
//
// It builds the history of one campaign as a real one leaves it, through the writers the loop
// uses: the pool seeded from bfcl-eval through the executor (seedCampaign); each step's reward
// groups, one per active task, applied by the aggregator's batch path on six partitions
// (processBatch) and the step closed (closeReadySteps); each step planned by the curriculum
// activity (planStep: retirements, selections, injections, pruning); each selected seed's
// synthesis recorded as a run records it (SynthesisStarted, four StageCompleted, then
// CandidateValidated or CandidateRejected, through the pool projection); and the outbox relay
// publishing it all to a private topic, as it would to Kafka. What it leaves out: the LLM calls
// and the executor's checks of a candidate (a validated candidate is its seed with new user
// turns), Temporal (the activities run in Temporal's mock activity environment) and the gateway.
//
// At step `early` and at the last step it times five reads: a planning step (the median of the
// `window` steps before the point), a status call (the report of `rods campaign status`, Kafka
// part included), a dashboard poll (the series), a lineage lookup (a generated task of depth 1,
// with its ancestry's reward history, as the dashboard's lineage view) and a replay resume over
// one step's events (`rods replay --no-compare` after each of the `window` steps before the
// point, the median; the comparison with the live tables, which reads every row the campaign has,
// is timed apart). Each other read is the median of `repeats`.
// `ratio` is the largest late ÷ early of the five. Also: bytes per 1,000 steps of every table.
import { randomUUID } from 'node:crypto';
import { readdir, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { MockActivityEnvironment } from '@temporalio/testing';
import { createCurriculumActivities } from '../../activities/curriculum.js';
import { workerEvent } from '../../activities/events.js';
import { ExecutorClient } from '../../activities/executor-client.js';
import { deliverPoolJsonl } from '../../activities/pool-sink.js';
import { loadLineageIndex } from '../../analysis/lineage/store.js';
import { replayCampaign } from '../../analysis/replay/replay.js';
import { campaignStatus } from '../../analysis/status/campaign-status.js';
import { dashboardSeries, rewardHistory } from '../../analysis/status/dashboard.js';
import { StatusKafka } from '../../analysis/status/kafka-shared.js';
import { candidateHash } from '../../domain/candidate.js';
import {
  candidateId as candidateIdOf,
  eventIds,
  streams,
  synthesisId as synthesisIdOf,
} from '../../domain/ids.js';
import { fnv1a, mulberry32 } from '../../domain/random.js';
import type { StepPlan } from '../../domain/step-plan.js';
import type { TaskRecord } from '../../domain/task.js';
import { defaultRegistry } from '../../platform/codec/registry.js';
import { loadEndpoints } from '../../platform/config/endpoints.js';
import { ensureTopics, withAdmin } from '../../platform/kafka/client.js';
import { registerCampaign } from '../../platform/store/campaigns.js';
import { createPool, inTransaction } from '../../platform/store/db.js';
import { recordAnchor } from '../../platform/store/events/audit.js';
import { headCursor } from '../../platform/store/events/event-store.js';
import { migrate } from '../../platform/store/migrate.js';
import { activePool } from '../../platform/store/pool/active.js';
import { recordEventsIn } from '../../platform/store/pool/projection.js';
import { newestGeneratedOfDepth } from '../../platform/store/pool/view.js';
import { relationSizes } from '../../platform/store/tables.js';
import { installNodeSha256 } from '../../platform/util/node-sha256.js';
import { processBatch, type RewardRecord } from '../../stages/aggregator/batch.js';
import { CampaignCache } from '../../stages/aggregator/campaign-cache.js';
import { closeReadySteps } from '../../stages/aggregator/steps.js';
import { TaskStateCache } from '../../stages/aggregator/task-cache.js';
import { encodeRecord } from '../../stages/aggregator/trace.js';
import { Relay } from '../../stages/relay/relay.js';
import type { BenchResult } from './result.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const PARTITIONS = 6;
const ROLLOUTS = 16;
/** Share of synthesis runs that end validated (the rest rejected, by reason). */
const VALIDATED_SHARE = 0.6;
const REJECTIONS = ['judge-rejected', 'execution-failed', 'near-duplicate', 'gate-failed'];

export interface LongCampaignOptions {
  steps: number;
  tasks: number;
  early: number;
  window: number;
  repeats: number;
  quiet: boolean;
}

export function longCampaignOptions(opts: Record<string, string | boolean>): LongCampaignOptions {
  const num = (k: string, d: number, min = 1) => {
    const v = opts[k];
    if (v === undefined || v === true) return d;
    const n = Number(v);
    if (!Number.isInteger(n) || n < min) throw new Error(`--${k} must be an integer >= ${min}, got ${v}`);
    return n;
  };
  const o = {
    steps: num('steps', 10_000),
    tasks: num('tasks', 800, 8),
    early: num('early', 100),
    window: num('window', 10),
    repeats: num('repeats', 5),
    quiet: Boolean(opts.json),
  };
  if (o.early >= o.steps) throw new Error(`--early (${o.early}) must be below --steps (${o.steps})`);
  if (o.window >= o.early) throw new Error(`--window (${o.window}) must be below --early (${o.early})`);
  return o;
}

export default async function longCampaignBench(
  opts: Record<string, string | boolean>,
): Promise<BenchResult> {
  return (await runLongCampaign(longCampaignOptions(opts))) as unknown as BenchResult;
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? 0 : s[s.length >> 1]!;
};
const round = (x: number, d = 2) => Math.round(x * 10 ** d) / 10 ** d;

async function timed<T>(fn: () => Promise<T>): Promise<{ ms: number; value: T }> {
  const t0 = performance.now();
  const value = await fn();
  return { ms: performance.now() - t0, value };
}

/** Per-task reward model: a latent logit and a learning rate, from the task id (seeds) or near the boundary (generated tasks). */
function policyOf(taskId: string, origin: string) {
  const r = mulberry32(fnv1a(taskId));
  return origin === 'seed'
    ? { logit: -3 + 6 * r(), rate: 0.004 * r() }
    : { logit: -1.2 + 2.4 * r(), rate: 0.01 * r() };
}

export type LongCampaignResult = Awaited<ReturnType<typeof runLongCampaign>>;

export async function runLongCampaign(o: LongCampaignOptions) {
  const log = (m: string) => o.quiet || process.stderr.write(`${m}\n`);
  installNodeSha256();
  await migrate();
  // The owner role: replay builds its schema.
  const pool = createPool({
    application: 'rods-bench-long-campaign',
    max: 6,
    connectionString: loadEndpoints().ownerDatabaseUrl,
    limits: { statementTimeoutMs: 0 },
  });
  const registry = defaultRegistry();
  const campaignId = `bench-long-${randomUUID().slice(0, 8)}`;
  const perCategory = Math.max(1, Math.round(o.tasks / 8));
  const config = {
    seeds: { perCategory },
    pool: { generatedCap: o.tasks - perCategory * 4 },
  };
  const relayName = `bench-long-${campaignId}`;
  const relayTopic = `bench.long.${campaignId}`;
  const statusKafka = new StatusKafka(() => campaignId);
  let relay: Relay | undefined;
  const sinkDir = path.join(ROOT, '.stack', 'bench-sink');
  try {
    await registerCampaign(pool, { campaignId, config });
    await withAdmin((a) =>
      ensureTopics(a, [
        { name: relayTopic, key: 'campaign', partitions: 1, replicationFactor: 1, config: {}, doc: 'bench' },
      ]),
    );
    relay = new Relay(pool, {
      name: relayName,
      startAfter: await headCursor(pool),
      route: (e) => ({ topic: relayTopic, key: e.streamId }),
      pollMs: 500,
    });
    await relay.start();

    const env = new MockActivityEnvironment();
    const curriculum = createCurriculumActivities({ pool, executor: new ExecutorClient() });
    const seeded = (await env.run(curriculum.seedCampaign, { campaignId, perCategory })) as {
      seeded: number;
    };
    log(`seeded ${seeded.seeded} tasks from bfcl-eval`);

    const deps = {
      pool,
      registry,
      campaigns: new CampaignCache(pool),
      groupId: `bench-long-${campaignId}`,
      deadLetter: async () => {},
      tasks: new TaskStateCache(),
    };
    const offsets = new Array<number>(PARTITIONS).fill(0);
    const ages = new Map<string, { logit: number; rate: number; born: number }>();
    const planMs: number[] = [];
    const resumes: { ms: number; events: number }[] = [];
    const stepMs: number[] = [];
    const counts = { groups: 0, selected: 0, validated: 0, rejected: 0, injected: 0, retired: 0, pruned: 0 };
    const points: Record<
      string,
      PointReads & {
        step: number;
        rss_bytes: number;
        heap_used_bytes: number;
        tableBytes: Record<string, number>;
        sinkBytes: number;
        relayTopicBytes: number;
      }
    > = {};
    const topic = `bench.long.rewards.${campaignId}`;
    const window = o.window;
    const t0 = Date.now();

    for (let step = 1; step <= o.steps; step++) {
      // 1. The trainer's step: one group per active task, through the aggregator's batch path.
      const sa = performance.now();
      const { tasks } = await activePool(pool, campaignId);
      const batches: RewardRecord[][] = Array.from({ length: PARTITIONS }, () => []);
      const draw = mulberry32(fnv1a(`${campaignId}:${step}`));
      for (const t of tasks) {
        let m = ages.get(t.taskId);
        if (!m) {
          m = { ...policyOf(t.taskId, t.origin), born: step };
          ages.set(t.taskId, m);
        }
        const p = 1 / (1 + Math.exp(-(m.logit + m.rate * (step - m.born))));
        const rewards = Array.from({ length: ROLLOUTS }, () =>
          draw() < p ? 1 : draw() < 0.3 ? Math.floor(draw() * 16) / 16 : 0,
        );
        const part = fnv1a(t.taskId) % PARTITIONS;
        const r = encodeRecord(
          {
            kind: 'group',
            group: {
              eventId: eventIds.simulatedRolloutGroup(campaignId, step, t.taskId),
              campaignId,
              taskId: t.taskId,
              step,
              rewards,
            },
          },
          campaignId,
        );
        batches[part]!.push({ offset: String(offsets[part]!++), key: Buffer.from(r.key), value: r.value });
      }
      const close = encodeRecord({ kind: 'close', step, groupCount: tasks.length }, campaignId);
      batches[0]!.push({ offset: String(offsets[0]!++), key: Buffer.from(close.key), value: close.value });
      for (let p = 0; p < PARTITIONS; p++) await processBatch(deps, topic, p, batches[p]!);
      await closeReadySteps(pool, [campaignId]);
      counts.groups += tasks.length;
      stepMs.push(performance.now() - sa);

      // 2. The campaign's step: planned, then its syntheses recorded (each ends before the next step).
      const planned = await timed(() =>
        env.run(curriculum.planStep, { campaignId, step, config, inFlight: [], runningSyntheses: 0 }),
      );
      planMs.push(planned.ms);
      const plan = planned.value as StepPlan;
      // The pool sink as the worker writes it: a file per pool version (the newest 20 kept).
      if (plan.versionChanged) await deliverPoolJsonl(pool, sinkDir, campaignId, plan.poolVersion);
      // An audit anchor of the store every 50 steps (about ten minutes of a real campaign).
      if (step % 50 === 0) await recordAnchor(pool, { onlyIfChanged: true });
      counts.selected += plan.selected.length;
      counts.injected += plan.injected.length;
      counts.retired += plan.retired.length;
      counts.pruned += plan.pruned.length;
      for (const seed of plan.selected) {
        const validated = draw() < VALIDATED_SHARE;
        await recordSynthesis(pool, campaignId, step, seed, validated, REJECTIONS[Math.floor(draw() * 4)]!);
        if (validated) counts.validated++;
        else counts.rejected++;
      }

      // 3. The relay publishes what the step appended, as a live relay keeps up.
      await relay.run({ untilCaughtUp: true });

      // 4. The replay keeps up (its checkpoint moves): every 500 steps, and after each of the
      // `window` steps before a point, where each resume (one step's events) is timed.
      const point = step === o.early ? 'early' : step === o.steps ? 'late' : undefined;
      const nextPoint = step < o.early ? o.early : o.steps;
      if (step > nextPoint - window) {
        const r = await timed(() => replayCampaign(pool, { campaignId, compare: false }));
        resumes.push({ ms: r.ms, events: r.value.events - r.value.resumedFrom });
      } else if (step === nextPoint - window || step % 500 === 0)
        await replayCampaign(pool, { campaignId, compare: false });
      if (point) {
        const reads = await timeReads(pool, campaignId, statusKafka, o.repeats, {
          relayName,
          aggregatorGroup: deps.groupId,
          rewardsTopic: relayTopic,
        });
        const last = resumes.splice(0);
        const mem = process.memoryUsage();
        points[point] = {
          step,
          rss_bytes: mem.rss,
          heap_used_bytes: mem.heapUsed,
          sinkBytes: await dirBytes(path.join(sinkDir, campaignId)),
          relayTopicBytes: await dirBytes(path.join(ROOT, '.stack/data/kafka', `${relayTopic}-0`)),
          ...reads,
          replay_resume_ms: round(median(last.map((r) => r.ms))),
          replay_resume_events: round(median(last.map((r) => r.events)), 0),
          planning_ms: round(median(planMs.slice(-window))),
          aggregation_ms: round(median(stepMs.slice(-window))),
          tableBytes: await relationSizes(pool),
        };
        log(`${point} (step ${step}): ${JSON.stringify(points[point])}`);
      }
      if (step % 100 === 0)
        log(
          `step ${step}/${o.steps}: ${tasks.length} active, plan ${round(planned.ms)} ms, ${counts.injected} injected, ${counts.validated} validated, ${round((Date.now() - t0) / 1000, 0)} s`,
        );
    }

    const early = points.early!;
    const late = points.late!;
    const ratios = Object.fromEntries(
      (['planning_ms', 'status_ms', 'dashboard_ms', 'lineage_ms', 'replay_resume_ms'] as const).map((k) => [
        k.replace(/_ms$/, ''),
        round(late[k] / Math.max(early[k], 0.001), 3),
      ]),
    );
    const per1000 = (late.step - early.step) / 1000;
    const growth: Record<string, number> = Object.fromEntries(
      Object.keys(late.tableBytes)
        .map((t) => [t, Math.round((late.tableBytes[t]! - (early.tableBytes[t] ?? 0)) / per1000)] as const)
        .filter(([, b]) => b !== 0),
    );
    const strip = ({ tableBytes: _t, sinkBytes: _s, relayTopicBytes: _k, ...rest }: typeof early) => rest;
    // Files and topic: what they hold late against early (the sink keeps the newest 20 versions).
    const fileGrowth = {
      pool_sink_files: Math.round((late.sinkBytes - early.sinkBytes) / per1000),
      relay_topic: Math.round((late.relayTopicBytes - early.relayTopicBytes) / per1000),
    };
    return {
      steps: o.steps,
      tasks: o.tasks,
      campaign: campaignId,
      build_seconds: round((Date.now() - t0) / 1000, 1),
      counts,
      early: strip(early),
      late: strip(late),
      late_over_early: ratios,
      ratio: Math.max(...Object.values(ratios)),
      bytes_per_1000_steps: { ...growth, ...fileGrowth } as Record<string, number>,
    };
  } finally {
    await relay?.stop().catch(() => {});
    await statusKafka.close().catch(() => {});
    await withAdmin((a) => a.deleteTopics([relayTopic])).catch(() => {});
    await rm(path.join(sinkDir, campaignId), { recursive: true, force: true });
    await pool.end();
  }
}

/** Bytes of the files under a folder (0 when it does not exist). */
async function dirBytes(dir: string): Promise<number> {
  let total = 0;
  try {
    for (const e of await readdir(dir, { withFileTypes: true }))
      total += e.isDirectory()
        ? await dirBytes(path.join(dir, e.name))
        : (await stat(path.join(dir, e.name))).size;
  } catch {
    return 0;
  }
  return total;
}

interface PointReads {
  status_ms: number;
  dashboard_ms: number;
  lineage_ms: number;
  lineage_task: string | null;
  replay_resume_ms: number;
  replay_resume_events: number;
  replay_compare_ms: number;
  replay_equal: boolean;
  planning_ms: number;
  aggregation_ms: number;
}

async function timeReads(
  pool: ReturnType<typeof createPool>,
  campaignId: string,
  statusKafka: StatusKafka,
  repeats: number,
  status: { relayName: string; aggregatorGroup: string; rewardsTopic: string },
): Promise<Omit<PointReads, 'planning_ms' | 'aggregation_ms' | 'replay_resume_ms' | 'replay_resume_events'>> {
  // The replay is caught up (its resumes were timed step by step): the comparison alone.
  const compare = await timed(() => replayCampaign(pool, { campaignId }));
  // The newest generated task of depth 1: the same kind of ancestry at both points.
  const target = (await newestGeneratedOfDepth(pool, campaignId, 1)) ?? null;
  const ms = { status: [] as number[], dashboard: [] as number[], lineage: [] as number[] };
  for (let i = 0; i < repeats; i++) {
    ms.status.push(
      (
        await timed(() =>
          campaignStatus({ db: pool, temporal: null, statusKafka }, campaignId, {
            ...status,
            deadLetters: false,
          }),
        )
      ).ms,
    );
    ms.dashboard.push((await timed(() => dashboardSeries(pool, campaignId))).ms);
    if (target)
      ms.lineage.push(
        (
          await timed(async () => {
            const index = await loadLineageIndex(pool, campaignId, target);
            const l = index.lineage(target);
            const ids: string[] = [];
            const walk = (n: NonNullable<typeof l>['root']) => {
              ids.push(n.taskId);
              for (const p of n.parents) walk(p);
            };
            if (l) walk(l.root);
            return rewardHistory(pool, campaignId, ids);
          })
        ).ms,
      );
  }
  return {
    status_ms: round(median(ms.status)),
    dashboard_ms: round(median(ms.dashboard)),
    lineage_ms: round(median(ms.lineage)),
    lineage_task: target,
    replay_compare_ms: round(compare.ms),
    replay_equal: compare.value.equal,
  };
}

/**
 * What one synthesis run of a selected seed leaves in the store: its start, four stages and its
 * outcome, in the synthesis stream, through the pool projection (which queues a validated
 * candidate for injection). A validated candidate is its seed with new user turns.
 */
async function recordSynthesis(
  pool: ReturnType<typeof createPool>,
  campaignId: string,
  step: number,
  seed: StepPlan['selected'][number],
  validated: boolean,
  reasonCode: string,
): Promise<void> {
  const sid = synthesisIdOf(campaignId, step, seed.taskId);
  const candidateId = candidateIdOf(seed.taskId, step);
  const now = Date.now();
  const stream = streams.synthesis(sid);
  const started = workerEvent('SynthesisStarted', eventIds.synthesisStarted(sid), {
    campaignId,
    synthesisId: sid,
    seedTaskId: seed.taskId,
    selectionEventId: seed.selectionEventId,
    generatorModel: 'bench-generator',
    occurredAt: now,
  });
  const stages = (['plan', 'execute', 'rewrite', 'critique'] as const).map((stage) =>
    workerEvent('StageCompleted', eventIds.stageCompleted(sid, stage, 0), {
      campaignId,
      synthesisId: sid,
      attempt: 0,
      stage,
      model: stage === 'execute' ? null : 'bench-generator',
      promptVersionHash: stage === 'execute' ? null : `${stage}-prompt`,
      outputHash: `${sid}:${stage}`,
      // About what the stand-in reports for a stage (its requests' usage).
      promptTokens: stage === 'execute' ? null : 1500,
      completionTokens: stage === 'execute' ? null : 400,
      occurredAt: now,
    }),
  );
  const task: TaskRecord = {
    ...seed.task,
    id: candidateId,
    question: seed.task.question.map((turn, i) =>
      turn.map((m) => ({ ...m, content: `${m.content} (variant ${step}.${i})` })),
    ),
  };
  const outcome = validated
    ? workerEvent(
        'CandidateValidated',
        eventIds.candidateValidated(sid),
        {
          campaignId,
          synthesisId: sid,
          candidateId,
          seedTaskId: seed.taskId,
          category: task.category,
          candidate: JSON.stringify(task),
          candidateHash: candidateHash(task),
          judgeModel: 'bench-judge',
          judgeScores: { alignment: 1 },
          refined: false,
          occurredAt: now,
        },
        {
          lineage: {
            parents: [seed.taskId],
            rootSeedId: seed.rootSeedId,
            depth: seed.depth,
            parentPhi: seed.phi,
            category: task.category,
            step,
            policyVersion: seed.policyVersion,
            triggeringStats: seed.stats,
            selectionEventId: seed.selectionEventId,
            synthesisId: sid,
            judgeVerdict: 'accept',
            judgeScores: { alignment: 1 },
            judgeReasons: [],
          },
        },
      )
    : workerEvent('CandidateRejected', eventIds.candidateRejected(sid), {
        campaignId,
        synthesisId: sid,
        candidateId,
        seedTaskId: seed.taskId,
        stage: 'critique',
        reasonCode,
        reason: `bench: ${reasonCode}`,
        occurredAt: now,
      });
  await inTransaction(pool, (c) => recordEventsIn(c, stream, [started, ...stages, outcome]));
}
