// What the gateway's dashboard draws for a campaign (entry/gateway/dashboard.ts), read from the
// projections and the event store: band counts and reward variance per closed step, the pool per
// planned step, the pool by origin and generation, the synthesis funnel (analysis/status/funnel.ts) with
// what became of the injected tasks, and each synthesis's latency. The live part (aggregator lag,
// dead letters, what a step waits for) is the campaign status (analysis/status/campaign-status.ts).
import type pg from 'pg';
import { lastPlannedStep, lastPlannedSteps, planSummaries } from '../../platform/store/campaign-plans.js';
import { listCampaignRows } from '../../platform/store/campaigns.js';
import { synthesisLatencyRows } from '../../platform/store/events/campaign-reads.js';
import { legacyTaskEvents, taskStepHistory } from '../../platform/store/events/task-steps.js';
import {
  type CompositionRow,
  findPoolTasks,
  poolComposition,
  poolVersions,
  type TaskMatch,
} from '../../platform/store/pool/view.js';
import { lastClosedStep, stepSummaries } from '../../platform/store/steps/view.js';
import { type GeneratorCost, generatorCost, type SynthesisFunnel, synthesisFunnel } from './funnel.js';

export interface StepPoint {
  step: number;
  closedAt: string | null;
  hard: number;
  boundary: number;
  mastered: number;
  /** Mean reward variance of the tasks of each band at that step (null: no task in the band). */
  varHard: number | null;
  varBoundary: number | null;
  varMastered: number | null;
  boundaryVarianceRatio: number | null;
}

export interface PoolPoint {
  step: number;
  version: number;
  active: number;
  seeds: number;
  generated: number;
}

export interface SynthesisLatency {
  synthesisId: string;
  seedTaskId: string | null;
  step: number | null;
  outcome: 'validated' | 'rejected';
  reasonCode: string | null;
  /** From SynthesisStarted to the run's first outcome, as recorded in the store. */
  ms: number;
}

export interface DashboardSeries {
  campaignId: string;
  steps: StepPoint[];
  pool: PoolPoint[];
  composition: CompositionRow[];
  funnel: SynthesisFunnel & { retired: number; pruned: number };
  /** The generator's tokens over the funnel (analysis/status/funnel.ts). */
  cost: GeneratorCost;
  /** The newest 200 runs by start only (synthesisLatencyRows' LATENCY_RUNS): a recent series. */
  latency: SynthesisLatency[];
  /** The steps and pool series hold every `stride`-th step and the last (every step while there are few). */
  sampling: { stride: number; points: number };
}

export type { CompositionRow, TaskMatch };

/** Most points of a step series: a poll costs the same at step 10,000 as at step 100. */
export const SERIES_POINTS = 120;

/**
 * The steps a series shows when the campaign is at step `last`: every step up to `points`, then
 * every `stride`-th (stride = ceil(last / points)) and the last one. undefined: every step.
 */
export function sampledSteps(last: number, points = SERIES_POINTS): { stride: number; steps?: number[] } {
  if (last <= points) return { stride: 1 };
  const stride = Math.ceil(last / points);
  const steps: number[] = [];
  for (let s = stride; s < last; s += stride) steps.push(s);
  steps.push(last);
  return { stride, steps };
}

const num = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) ? v : null);

export async function dashboardSeries(db: pg.Pool, campaignId: string): Promise<DashboardSeries> {
  const last = Math.max(await lastPlannedStep(db, campaignId), await lastClosedStep(db, campaignId));
  const sample = sampledSteps(last);
  const [steps, plans, composition, latency, funnel] = await Promise.all([
    stepSummaries(db, campaignId, sample.steps),
    planSummaries(db, campaignId, sample.steps),
    poolComposition(db, campaignId),
    synthesisLatencyRows(db, campaignId),
    synthesisFunnel(db, campaignId),
  ]);
  const band = (s: Record<string, unknown> | null, b: string) =>
    (s?.[b] ?? {}) as { tasks?: number; meanVariance?: number | null };
  const generated = composition.filter((r) => r.origin === 'generated');
  return {
    campaignId,
    sampling: { stride: sample.stride, points: SERIES_POINTS },
    steps: steps.map((r) => ({
      step: Number(r.step),
      closedAt: r.closedAt?.toISOString() ?? null,
      hard: band(r.summary, 'hard').tasks ?? 0,
      boundary: band(r.summary, 'boundary').tasks ?? 0,
      mastered: band(r.summary, 'mastered').tasks ?? 0,
      varHard: num(band(r.summary, 'hard').meanVariance),
      varBoundary: num(band(r.summary, 'boundary').meanVariance),
      varMastered: num(band(r.summary, 'mastered').meanVariance),
      boundaryVarianceRatio: num(r.summary?.boundaryVarianceRatio),
    })),
    pool: plans.map((r) => {
      const active = num(r.result.activeSize) ?? 0;
      const gen = num(r.result.generated) ?? 0;
      return {
        step: Number(r.step),
        version: num(r.result.poolVersion) ?? 0,
        active,
        seeds: active - gen,
        generated: gen,
      };
    }),
    composition,
    funnel: {
      ...funnel,
      retired: generated.reduce((a, r) => a + r.retired, 0),
      pruned: generated.reduce((a, r) => a + r.pruned, 0),
    },
    cost: await generatorCost(db, campaignId, funnel),
    latency: latency.map((r) => ({
      synthesisId: r.synthesis_id,
      seedTaskId: r.seed,
      step: r.step === null ? null : Number(r.step),
      outcome: r.type === 'CandidateValidated' ? 'validated' : 'rejected',
      reasonCode: r.reason,
      ms: Math.max(0, Math.round(r.ms)),
    })),
  };
}

export interface CampaignListItem {
  campaignId: string;
  name: string;
  status: string;
  createdAt: string;
  poolVersion: number;
  /** Last planned step. */
  step: number;
}

/** Registered campaigns, newest first; `only` limits them to these ids (a token's campaign scopes). */
export async function listCampaigns(
  db: pg.Pool,
  only: readonly string[] | null,
  limit = 200,
): Promise<CampaignListItem[]> {
  const campaigns = await listCampaignRows(db, only, limit);
  const ids = campaigns.map((c) => c.campaignId);
  const [versions, planned] = await Promise.all([poolVersions(db, ids), lastPlannedSteps(db, ids)]);
  const step = new Map(planned.map((p) => [p.campaign_id, Number(p.n)]));
  return campaigns.map((c) => ({
    campaignId: c.campaignId,
    name: c.name,
    status: c.status,
    createdAt: c.createdAt.toISOString(),
    poolVersion: versions.get(c.campaignId) ?? 0,
    step: step.get(c.campaignId) ?? 0,
  }));
}

/** Pool tasks of a campaign whose id contains `q`, generated and deepest first. */
export async function findTasks(
  db: pg.Pool,
  campaignId: string,
  q: string,
  limit = 50,
): Promise<TaskMatch[]> {
  return findPoolTasks(db, campaignId, q, limit);
}

export interface RewardPoint {
  taskId: string;
  step: number;
  /** Mean and variance of the step's reward group, and the running mean after it. */
  groupMean: number;
  groupVariance: number;
  mean: number;
  band: string | null;
}

/**
 * The reward history of these tasks: one point per step from the aggregator's per-step records of
 * the newest `steps` steps (default DEFAULT_HISTORY_STEPS), after the points of the TaskStatsUpdated
 * events of campaigns recorded before them.
 */
export async function rewardHistory(
  db: pg.Pool,
  campaignId: string,
  taskIds: readonly string[],
  opts: { steps?: number } = {},
): Promise<RewardPoint[]> {
  if (taskIds.length === 0) return [];
  const legacy = (await legacyTaskEvents(db, campaignId, 'TaskStatsUpdated', taskIds)).map((e) => ({
    taskId: e.payload.taskId,
    step: e.payload.stats.lastStep,
    groupMean: e.payload.stats.latestGroupMean,
    groupVariance: e.payload.stats.latestGroupVariance,
    mean: e.payload.stats.mean,
    band: e.payload.stats.band,
  }));
  const { entries } = await taskStepHistory(db, campaignId, taskIds, opts);
  return [
    ...legacy,
    ...entries.map((e) => ({
      taskId: e.taskId,
      step: e.step,
      groupMean: e.latestGroupMean,
      groupVariance: e.latestGroupVariance,
      mean: e.mean,
      band: e.band,
    })),
  ];
}
