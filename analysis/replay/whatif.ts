// `rods whatif`: re-run the band detector and the step decider — the same planStep
// (domain/step-plan.ts) as the live campaign — over the campaign's recorded reward stream under other thresholds, and compare
// the seeds that would have been selected, retired and injected with what happened.
//
// Its limit, stated in every report: the recorded rewards are those of the pool that really
// trained. Once a decision differs, the rewards that would have followed differ too (other tasks
// in the pool, another policy), and synthesis is not re-run: a what-if only injects candidates
// that really were synthesized, from seeds it also selected. With the campaign's own thresholds
// it reproduces the recorded decisions exactly.

import type pg from 'pg';
import { windowSpec } from '../../domain/band.js';
import type { CampaignConfig } from '../../domain/campaign-config.js';
import { DedupeWindows } from '../../domain/dedupe.js';
import type { RejectionStreak } from '../../domain/pool/policy.js';
import type { PoolState } from '../../domain/pool/state.js';
import { planStep, type StepCandidate } from '../../domain/step-plan.js';
import { statsRecord, type TaskState } from '../../domain/task-stats.js';
import { campaignConfigOf } from '../../platform/config/campaign-config.js';
import { planResults, seededState } from '../../platform/store/campaign-plans.js';
import { loadCampaign } from '../../platform/store/campaigns.js';
import { candidatesByIds } from '../../platform/store/pool/candidates.js';
import { groupPartitions } from '../../platform/store/steps/view.js';
import type { TaskStats } from '../../schemas/types.generated.js';
import { foldGroups, forEachCampaignGroupInOrder, type RecordedGroup } from './reward-stream.js';

export const WHATIF_LIMITS =
  'The recorded rewards are those of the pool that really trained: after the first differing decision, the rewards that would have followed differ too, and synthesis is not re-run (only candidates that were really synthesized, from seeds the what-if also selected, can be injected). Overlaps after the first difference are indicative, not predictions.';

export interface WhatIfOverrides {
  low?: number;
  high?: number;
  retire?: number;
  budget?: number;
  window?: string;
  /** Seed selection that sees variance (selection.varianceGuard, minGroups, maxStaleSteps). */
  varianceGuard?: 'skip' | 'rank' | 'off';
  minGroups?: number;
  maxStaleSteps?: number;
}

/** The parts of a recorded plan (activities/curriculum.ts StepPlan) a what-if compares and re-uses. */
export interface RecordedPlan {
  step: number;
  selected: { taskId: string }[];
  retired: { taskId: string }[];
  injected: string[];
  inputs?: {
    inFlight: string[];
    runningSyntheses: number;
    enqueued: string[];
    rejectionStreaks?: Record<string, RejectionStreak>;
  };
}

export interface DecisionDiff {
  whatif: number;
  actual: number;
  jaccard: number;
  onlyWhatif: string[];
  onlyActual: string[];
}

export interface WhatIfStep {
  step: number;
  selected: DecisionDiff;
  retired: DecisionDiff;
  injected: DecisionDiff;
}

export interface WhatIfReport {
  campaignId: string;
  config: {
    low: number;
    high: number;
    retire: number;
    budget: number;
    window: string;
    varianceGuard: string;
    minGroups: number;
    maxStaleSteps: number;
  };
  steps: WhatIfStep[];
  totals: Record<
    'selected' | 'retired' | 'injected',
    { whatif: number; actual: number; meanJaccard: number }
  >;
  reproduced: boolean;
  limits: string;
}

export class WhatIfError extends Error {
  override name = 'WhatIfError';
}

function diff(whatif: string[], actual: string[]): DecisionDiff {
  const a = new Set(whatif);
  const b = new Set(actual);
  const inter = [...a].filter((x) => b.has(x)).length;
  const union = new Set([...a, ...b]).size;
  return {
    whatif: a.size,
    actual: b.size,
    jaccard: union === 0 ? 1 : inter / union,
    onlyWhatif: [...a].filter((x) => !b.has(x)).sort(),
    onlyActual: [...b].filter((x) => !a.has(x)).sort(),
  };
}

/** The campaign's config with the what-if's overrides (validated like any config). */
export function whatIfConfig(raw: unknown, o: WhatIfOverrides): CampaignConfig {
  const base = JSON.parse(JSON.stringify(raw ?? {})) as Record<string, Record<string, unknown>>;
  base.detector = { ...(base.detector ?? {}) };
  base.pool = { ...(base.pool ?? {}) };
  base.selection = { ...(base.selection ?? {}) };
  if (o.low !== undefined) base.detector.low = o.low;
  if (o.high !== undefined) base.detector.high = o.high;
  if (o.window !== undefined) base.detector.window = o.window;
  if (o.retire !== undefined) base.pool.retireMasteredAbove = o.retire;
  if (o.budget !== undefined) base.selection.budgetPerStep = o.budget;
  if (o.varianceGuard !== undefined) base.selection.varianceGuard = o.varianceGuard;
  if (o.minGroups !== undefined) base.selection.minGroups = o.minGroups;
  if (o.maxStaleSteps !== undefined) base.selection.maxStaleSteps = o.maxStaleSteps;
  try {
    return campaignConfigOf(base);
  } catch (e) {
    throw new WhatIfError((e as Error).message);
  }
}

/** A candidate as the candidates table holds it (the fields a what-if reads). */
export interface WhatIfCandidate {
  candidate_id: string;
  seed_task_id: string;
  candidate: { id?: string; category?: string };
  lineage: { parentPhi?: number; step?: number };
}

/** What a what-if re-decides from: the campaign's recorded plans, candidates and reward groups. */
export interface CampaignRecord {
  /** The pool seeding left (step 0). */
  seeded: PoolState;
  /** Every plan after the seeding, in step order. */
  plans: readonly { step: number; result: RecordedPlan }[];
  candidates: readonly WhatIfCandidate[];
  /** The campaign's reward groups in step order. */
  groups: readonly RecordedGroup[];
}

/**
 * The pure core of a what-if, one step at a time: from the seeded pool, re-decide each recorded
 * step with planStep under `cfg`, from the statistics the reward groups folded so far give and the
 * inputs the campaign recorded (syntheses in flight, candidates queued), and compare with the
 * recorded plan. It keeps the tasks' states and dedupe windows, not the groups: a caller folds
 * each step's groups before deciding it (whatIfSteps from an array, whatIf from the topic).
 */
export class WhatIfRun {
  private state: PoolState;
  private readonly states = new Map<string, TaskState>();
  private readonly seen = new DedupeWindows();
  /** seed -> steps selected in the what-if */
  private readonly selectedAt = new Map<string, number[]>();
  readonly steps: WhatIfStep[] = [];

  constructor(
    private readonly cfg: CampaignConfig,
    seeded: PoolState,
  ) {
    this.state = seeded;
  }

  fold(groups: readonly RecordedGroup[]): void {
    foldGroups(groups, this.states, this.seen, this.cfg);
  }

  /** Decides the recorded step; `candidate` gives a queued candidate by id. */
  decide(
    row: { step: number; result: RecordedPlan },
    candidate: (id: string) => WhatIfCandidate | undefined,
  ): void {
    const step = row.step;
    const recorded = row.result;
    const stats: Record<string, TaskStats> = {};
    for (const [id, s] of this.states) stats[id] = statsRecord(s);

    // Candidates the campaign queued at this step exist in the what-if only if it selected their seed too.
    const candidates: StepCandidate[] = [];
    for (const id of recorded.inputs?.enqueued ?? []) {
      const c = candidate(id);
      if (!c) continue;
      const selSteps = this.selectedAt.get(c.seed_task_id) ?? [];
      if (!selSteps.some((s) => s === c.lineage.step)) continue;
      candidates.push({
        candidateId: id,
        taskId: c.candidate.id ?? id,
        category: c.candidate.category ?? 'base',
        parents: [c.seed_task_id],
        parentPhi: c.lineage.parentPhi ?? 0,
      });
    }
    // A candidate whose seed left the what-if pool could not have been queued: planStep leaves it out.
    const decided = planStep({
      pool: this.state,
      step,
      config: this.cfg,
      stats,
      candidates,
      selection: {
        inFlight: recorded.inputs?.inFlight ?? [],
        runningSyntheses: recorded.inputs?.runningSyntheses ?? 0,
        rejectionStreaks: recorded.inputs?.rejectionStreaks,
      },
    });
    this.state = decided.state;
    for (const d of decided.selected)
      this.selectedAt.set(d.taskId, [...(this.selectedAt.get(d.taskId) ?? []), step]);
    this.steps.push({
      step,
      selected: diff(
        decided.selected.map((d) => d.taskId),
        recorded.selected.map((d) => d.taskId),
      ),
      retired: diff(
        decided.retired.map((d) => d.taskId),
        recorded.retired.map((d) => d.taskId),
      ),
      injected: diff(
        decided.injection.inject.map((d) => d.taskId),
        recorded.injected,
      ),
    });
  }
}

/** A what-if over a record held in memory (the groups in step order, read order within a step). */
export function whatIfSteps(cfg: CampaignConfig, record: CampaignRecord): WhatIfStep[] {
  const byCandidate = new Map(record.candidates.map((c) => [c.candidate_id, c]));
  const groups = record.groups;
  const run = new WhatIfRun(cfg, record.seeded);
  let g = 0;
  for (const row of record.plans) {
    const upto: RecordedGroup[] = [];
    while (g < groups.length && groups[g]!.step <= row.step) upto.push(groups[g++]!);
    run.fold(upto);
    run.decide(row, (id) => byCandidate.get(id));
  }
  return run.steps;
}

/** The what-if report of a campaign's record under `cfg` (pure; whatIf loads the record). */
export function whatIfReport(campaignId: string, cfg: CampaignConfig, record: CampaignRecord): WhatIfReport {
  return reportOf(campaignId, cfg, whatIfSteps(cfg, record));
}

function reportOf(campaignId: string, cfg: CampaignConfig, steps: WhatIfStep[]): WhatIfReport {
  const total = (k: 'selected' | 'retired' | 'injected') => ({
    whatif: steps.reduce((a, s) => a + s[k].whatif, 0),
    actual: steps.reduce((a, s) => a + s[k].actual, 0),
    meanJaccard: steps.length ? steps.reduce((a, s) => a + s[k].jaccard, 0) / steps.length : 1,
  });
  return {
    campaignId,
    config: {
      low: cfg.detector.low,
      high: cfg.detector.high,
      retire: cfg.pool.retireMasteredAbove,
      budget: cfg.selection.budgetPerStep,
      window: windowSpec(cfg.detector.window),
      varianceGuard: cfg.selection.varianceGuard,
      minGroups: cfg.selection.minGroups,
      maxStaleSteps: cfg.selection.maxStaleSteps,
    },
    steps,
    totals: { selected: total('selected'), retired: total('retired'), injected: total('injected') },
    reproduced: steps.every(
      (s) => s.selected.jaccard === 1 && s.retired.jaccard === 1 && s.injected.jaccard === 1,
    ),
    limits: WHATIF_LIMITS,
  };
}

/**
 * Groups read ahead of the step being decided, at most: past it, the lowest buffered step is
 * decided anyway (a partition far behind the others), and groups of it that come later are
 * folded at the next step (counted in `lateGroups`).
 */
export const WHATIF_BUFFERED_GROUPS = 200_000;

export async function whatIf(
  db: pg.Pool,
  opts: { campaignId: string; topic: string; overrides: WhatIfOverrides },
): Promise<WhatIfReport & { lateGroups: number; readAhead: number }> {
  const campaign = await loadCampaign(db, opts.campaignId);
  if (!campaign) throw new WhatIfError(`unknown campaign ${JSON.stringify(opts.campaignId)}`);
  const cfg = whatIfConfig(campaign.rawConfig, opts.overrides);
  const seeded = await seededState<PoolState>(db, opts.campaignId);
  if (!seeded) throw new WhatIfError(`campaign ${opts.campaignId} has no seeded pool`);
  const run = new WhatIfRun(cfg, seeded);
  const plans = planResults<RecordedPlan>(db, opts.campaignId)[Symbol.asyncIterator]();
  let next = await plans.next();
  // Groups read and not folded yet, by step; a step is decided once every partition that holds
  // the campaign's groups was read past it (or ended): memory holds the read-ahead, not the campaign.
  const buffer = new Map<number, RecordedGroup[]>();
  let buffered = 0;
  let decidedThrough = 0;
  let lateGroups = 0;
  let readAhead = 0;
  const decide = async (ready: (step: number) => boolean) => {
    while (!next.done && (ready(next.value.step) || buffered > WHATIF_BUFFERED_GROUPS)) {
      const step = next.value.step;
      for (const s of [...buffer.keys()].sort((a, b) => a - b)) {
        if (s > step) break;
        const gs = buffer.get(s)!;
        run.fold(gs);
        buffered -= gs.length;
        buffer.delete(s);
      }
      const queued = next.value.result.inputs?.enqueued ?? [];
      const cands = new Map(
        ((await candidatesByIds(db, opts.campaignId, queued)) as WhatIfCandidate[]).map((c) => [
          c.candidate_id,
          c,
        ]),
      );
      run.decide(next.value, (id) => cands.get(id));
      decidedThrough = step;
      next = await plans.next();
    }
  };
  await forEachCampaignGroupInOrder(
    opts.topic,
    opts.campaignId,
    await groupPartitions(db, opts.campaignId, opts.topic),
    async (groups, readPast) => {
      for (const g of groups) {
        if (g.step <= decidedThrough) lateGroups++;
        const list = buffer.get(g.step);
        if (list) list.push(g);
        else buffer.set(g.step, [g]);
      }
      buffered += groups.length;
      readAhead = Math.max(readAhead, buffered);
      await decide(readPast);
    },
  );
  await decide(() => true);
  // readAhead: the most groups held at once (the memory a what-if needs beyond the tasks' states).
  return { ...reportOf(opts.campaignId, cfg, run.steps), lateGroups, readAhead };
}
