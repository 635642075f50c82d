// The curriculum policy over the pool: seeding, queueing, retirement, seed selection, injection
// and pruning. Every function here is pure and deterministic (no I/O, clock or randomness;
// iteration in task-id order; ties broken by task id), so the live campaign and replay compute the
// same decisions. One step's decisions are taken in one order by planStep (../step-plan.ts), the
// only caller outside domain/.
//
// The rules:
// - Statistic. Every rule reads the detector signal m of a task's TaskStats (the latest group mean
//   by default, or the EWMA / last-k mean the campaign's detector uses) and φ = 4·m·(1−m); the
//   band is recomputed from m with the config's thresholds, so a what-if replay under other
//   thresholds needs no new statistics. Statistics come from the lookup passed in, else from the
//   member's last recorded stats (an `observe` decision).
// - Retirement (retire). A task retires as `mastered` when m > pool.retireMasteredAbove (human
//   seeds only when pool.retireSeeds); a generated task retires in `burn_in` when, once observed,
//   m < pool.burnInFloor (at any evaluation after its first observation: a generated task that is
//   too hard carries no gradient and is replaceable). A task never observed is never retired by a
//   rule. The config keeps burnInFloor <= detector.low <= detector.high <= retireMasteredAbove, so
//   no rule ever retires a boundary task.
// - Selection (selectSeeds). Candidates are the pool members (human seeds and generated tasks)
//   in the boundary band, not in flight, and out of cooldown: a task selected at step s may be
//   selected again from step s + c + 1 on (c = selection.cooldownSteps), so never twice in a step.
//   Beyond the paper (seedIneligibility): a task needs selection.minGroups reward groups, its
//   latest group at most selection.maxStaleSteps old, and (varianceGuard `skip`) a latest group
//   whose variance is above selection.minGroupVariance: a flat group gives GRPO no gradient.
//   They are ranked by φ (or, varianceGuard `rank`, by the latest group's variance) (highest first, ties by task id) and taken greedily while the category's
//   quota M_τ has room (a category without a quota entry gets none; unused quota does not move
//   to other categories) and the step's capacity lasts: min(M, maxConcurrentSyntheses − running).
// - Injection (planInjection). Only at an injection boundary (isInjectionBoundary). At most
//   floor(β·|active pool|) queued candidates (β = pool.injectionShare; |active pool| = members
//   before this injection, seeds and generated), but at least 1 when the queue is non-empty, so
//   that a small or empty pool is not starved; and never more than P_max. The queue is FIFO:
//   by step queued, then higher parent φ, then candidate id. A queued candidate whose task id is
//   already in the pool (or earlier in the queue) is discarded, not injected.
// - Pruning (planInjection). After the injection, if generated members exceed P_max, the excess
//   is pruned: observed tasks first, lowest φ first (ties by task id); tasks not observed yet rank
//   after every observed task (they have not been trained on yet), among themselves oldest
//   injection first, then lowest parent φ, then task id; the tasks of this very injection rank
//   last. Because injection never exceeds P_max, a task is never injected and pruned in the same
//   change set. Human seeds are never pruned.
// - Versions. Every membership decision (seed, inject, retire, prune) carries the pool version it
//   produces: a planning function stamps its whole change set with pool.version + 1 (see
//   evolve.ts for how versions fold).
import type { TaskStats } from '../../schemas/types.generated.js';
import { bandOf, phi as phiOf } from '../band.js';
import { type CampaignConfig, isInjectionBoundary, type SelectionConfig } from '../campaign-config.js';
import { childLineage, type Lineage } from '../lineage.js';
import { fnv1a, mulberry32 } from '../random.js';
import type {
  DiscardDecision,
  EnqueueDecision,
  InjectDecision,
  PoolDecision,
  PruneDecision,
  RetireDecision,
  SeedDecision,
  SelectDecision,
} from './decisions.js';
import { PoolDecisionError } from './decisions.js';
import {
  compareIds,
  compareQueued,
  findMember,
  generatedCount,
  lookUp,
  memberLineage,
  type PoolMember,
  type PoolState,
  type QueuedCandidate,
  type RetirementRule,
  type TaskLookup,
} from './state.js';

function statsFor(m: PoolMember, statsByTask: TaskLookup<TaskStats> | undefined): TaskStats | undefined {
  const s = lookUp(statsByTask, m.taskId) ?? m.lastStats;
  return s && Number.isFinite(s.signal) ? s : undefined;
}

// ---------------------------------------------------------------------------------------------
// Seeding and queueing

/** Human seeds entering the pool: one change set (pool.version + 1); ids already present are skipped. */
export function seedTasks(
  pool: PoolState,
  seeds: readonly { taskId: string; category: string }[],
  step: number,
): SeedDecision[] {
  const seen = new Set<string>();
  const out: SeedDecision[] = [];
  for (const s of seeds) {
    if (seen.has(s.taskId) || findMember(pool, s.taskId)) continue;
    seen.add(s.taskId);
    out.push({ kind: 'seed', taskId: s.taskId, category: s.category, step, poolVersion: pool.version + 1 });
  }
  return out;
}

/**
 * A validated candidate entering the injection queue. Its lineage derives from its parents (seed
 * first): pool members, else `lineageOf` (e.g. the SelectDecision of a seed retired since, or the
 * lineage projection). Throws LineageError when the first parent is unknown to both.
 */
export function queueCandidate(
  pool: PoolState,
  c: { candidateId: string; taskId: string; category: string; parents: string[]; parentPhi: number },
  step: number,
  lineageOf?: (taskId: string) => Lineage | undefined,
): EnqueueDecision {
  const lineage = childLineage(c.parents, (id) => {
    const m = findMember(pool, id);
    return m ? memberLineage(m) : lineageOf?.(id);
  });
  return {
    kind: 'enqueue',
    candidate: {
      candidateId: c.candidateId,
      taskId: c.taskId,
      category: c.category,
      parents: [...c.parents],
      rootSeedId: lineage.rootSeedId,
      depth: lineage.depth,
      parentPhi: c.parentPhi,
      queuedAtStep: step,
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Retirement

/** Retirement decisions at a step, in task-id order, stamped pool.version + 1 (see the top of the file). */
export function retire(
  pool: PoolState,
  statsByTask: TaskLookup<TaskStats> | undefined,
  step: number,
  cfg: Pick<CampaignConfig, 'pool'>,
): RetireDecision[] {
  const poolVersion = pool.version + 1;
  const out: RetireDecision[] = [];
  for (const m of pool.members) {
    const s = statsFor(m, statsByTask);
    if (!s) continue;
    let rule: RetirementRule | null = null;
    if (s.signal > cfg.pool.retireMasteredAbove && (m.origin === 'generated' || cfg.pool.retireSeeds)) {
      rule = 'mastered';
    } else if (m.origin === 'generated' && s.signal < cfg.pool.burnInFloor) {
      rule = 'burn_in';
    }
    if (rule) out.push({ kind: 'retire', taskId: m.taskId, rule, stats: s, step, poolVersion });
  }
  return out.sort((a, b) => compareIds(a.taskId, b.taskId));
}

/** An operator's retirement of one task (any origin); throws when the task is not in the pool. */
export function manualRetirement(
  pool: PoolState,
  taskId: string,
  step: number,
  stats?: TaskStats | null,
): RetireDecision {
  const m = findMember(pool, taskId);
  if (!m) throw new PoolDecisionError(`task ${JSON.stringify(taskId)} is not in the pool`);
  return {
    kind: 'retire',
    taskId,
    rule: 'manual',
    stats: stats ?? m.lastStats ?? null,
    step,
    poolVersion: pool.version + 1,
  };
}

// ---------------------------------------------------------------------------------------------
// Seed selection

/** A pool member in a seed ranking, with the statistics and φ its selection records. */
export interface RankedSeed {
  member: PoolMember;
  stats: TaskStats;
  phi: number;
}

/**
 * The order in which selection considers seeds (best first). The paper's is boundaryRanking; an
 * ablation may rank otherwise (e.g. at random) and still go through the same in-flight, cooldown,
 * quota and capacity rules.
 */
export type SeedRanking = (
  pool: PoolState,
  statsByTask: TaskLookup<TaskStats> | undefined,
  step: number,
  cfg: Pick<CampaignConfig, 'detector' | 'selection'>,
) => RankedSeed[];

/** The latest children of a seed that were all rejected, newest first, with their reasons. */
export interface RejectionStreak {
  count: number;
  reasons: string[];
}

export interface SelectOptions {
  /** By seed task id: its run of rejected children (selection.rejectionBackoff). */
  rejectionStreaks?: Readonly<Record<string, RejectionStreak>>;
  /** Receives each boundary seed passed over for its rejected children, with the reason. */
  passedOver?: { taskId: string; reason: string }[];
  /** Tasks with a synthesis run in flight: never selected. */
  inFlight?: Iterable<string>;
  /** Synthesis runs in flight (defaults to the number of distinct inFlight tasks). */
  runningSyntheses?: number;
  /** The order seeds are considered in (default: boundaryRanking). */
  ranking?: SeedRanking;
}

/**
 * The boundary tasks, best first: by φ, or (varianceGuard `rank`) by the latest group's measured
 * variance with φ breaking ties. Whether a ranked task may be selected is seedIneligibility's.
 */
export function boundaryRanking(
  pool: PoolState,
  statsByTask: TaskLookup<TaskStats> | undefined,
  cfg: Pick<CampaignConfig, 'detector'> & { selection?: Pick<SelectionConfig, 'varianceGuard'> },
): RankedSeed[] {
  const out: RankedSeed[] = [];
  for (const m of pool.members) {
    const s = statsFor(m, statsByTask);
    if (!s || bandOf(s.signal, cfg.detector) !== 'boundary') continue;
    out.push({ member: m, stats: s, phi: phiOf(s.signal) });
  }
  const byVariance = cfg.selection?.varianceGuard === 'rank';
  return out.sort(
    (a, b) =>
      (byVariance ? b.stats.latestGroupVariance - a.stats.latestGroupVariance : 0) ||
      b.phi - a.phi ||
      compareIds(a.member.taskId, b.member.taskId),
  );
}

/**
 * Why a ranked task may not be a seed at this step on its statistics, or undefined: too few
 * groups to trust its band, statistics too old, or (guard `skip`) a flat latest group.
 */
export function seedIneligibility(
  stats: TaskStats,
  step: number,
  sel: Pick<SelectionConfig, 'varianceGuard' | 'minGroupVariance' | 'minGroups' | 'maxStaleSteps'>,
): string | undefined {
  if (stats.groupCount < sel.minGroups) return `${stats.groupCount} of ${sel.minGroups} reward groups`;
  if (sel.maxStaleSteps > 0 && step - stats.lastStep > sel.maxStaleSteps)
    return `statistics from step ${stats.lastStep}, older than ${sel.maxStaleSteps} steps`;
  if (sel.varianceGuard === 'skip' && stats.latestGroupVariance <= sel.minGroupVariance)
    return `latest group variance ${stats.latestGroupVariance} <= ${sel.minGroupVariance} (no gradient)`;
  return undefined;
}

/**
 * The `random` selection ablation: the members observed at least once, whatever their band or φ,
 * in a uniform order (Fisher–Yates) drawn from a generator seeded by (seed, step) alone, so a
 * replay or a what-if draws the same. Selection's cooldown, eligibility, quota and capacity rules
 * still apply.
 */
export function randomRanking(seed: number): SeedRanking {
  return (pool, statsByTask, step) => {
    const out: RankedSeed[] = [];
    for (const m of pool.members) {
      const s = statsFor(m, statsByTask);
      if (s) out.push({ member: m, stats: s, phi: phiOf(s.signal) });
    }
    out.sort((a, b) => compareIds(a.member.taskId, b.member.taskId));
    const draw = mulberry32(fnv1a(`rods-random-selection:${seed}:${step}`));
    for (let i = out.length - 1; i > 0; i--) {
      const j = Math.floor(draw() * (i + 1));
      [out[i], out[j]] = [out[j]!, out[i]!];
    }
    return out;
  };
}

/**
 * Why a seed is passed over for its rejected children, or undefined: its latest
 * rejectionBackoff.streak children were all rejected and it was last selected at most
 * rejectionBackoff.steps steps ago.
 */
export function rejectionBackoff(
  lastSelectedStep: number | undefined,
  streak: RejectionStreak | undefined,
  step: number,
  sel: Pick<SelectionConfig, 'rejectionBackoff'>,
): string | undefined {
  const { streak: needed, steps } = sel.rejectionBackoff;
  if (needed === 0 || !streak || streak.count < needed || lastSelectedStep === undefined) return undefined;
  if (step - lastSelectedStep > steps) return undefined;
  const reasons = [...new Set(streak.reasons)].join(', ');
  return `its last ${streak.count} children were rejected (${reasons}); passed over until step ${lastSelectedStep + steps + 1}`;
}

/** Whether a task selected at lastSelectedStep is still cooling down at step. */
export function inCooldown(
  lastSelectedStep: number | undefined,
  step: number,
  cooldownSteps: number,
): boolean {
  return lastSelectedStep !== undefined && step - lastSelectedStep <= cooldownSteps;
}

/** The seeds to synthesize from at a step, best φ first (see the top of the file for the rules). */
export function selectSeeds(
  pool: PoolState,
  statsByTask: TaskLookup<TaskStats> | undefined,
  step: number,
  cfg: Pick<CampaignConfig, 'detector' | 'selection'>,
  opts: SelectOptions = {},
): SelectDecision[] {
  const sel = cfg.selection;
  const inFlight = new Set(opts.inFlight ?? []);
  const running = opts.runningSyntheses ?? inFlight.size;
  const capacity = Math.max(0, Math.min(sel.budgetPerStep, sel.maxConcurrentSyntheses - running));
  // A ranking may draw from a generator: it runs even when there is no capacity, so the draws
  // of a step do not depend on the capacity.
  const ranked = opts.ranking
    ? opts.ranking(pool, statsByTask, step, cfg)
    : boundaryRanking(pool, statsByTask, cfg);
  const used = new Map<string, number>();
  const out: SelectDecision[] = [];
  if (capacity === 0) return out;
  for (const { member: m, stats, phi } of ranked) {
    if (out.length >= capacity) break;
    if (inFlight.has(m.taskId)) continue;
    if (inCooldown(m.lastSelectedStep, step, sel.cooldownSteps)) continue;
    if (seedIneligibility(stats, step, sel) !== undefined) continue;
    const backoff = rejectionBackoff(m.lastSelectedStep, opts.rejectionStreaks?.[m.taskId], step, sel);
    if (backoff !== undefined) {
      opts.passedOver?.push({ taskId: m.taskId, reason: backoff });
      continue;
    }
    const quota = Object.hasOwn(sel.perCategoryQuota, m.category) ? sel.perCategoryQuota[m.category]! : 0;
    const slot = used.get(m.category) ?? 0;
    if (slot >= quota) continue;
    used.set(m.category, slot + 1);
    out.push({
      kind: 'select',
      taskId: m.taskId,
      category: m.category,
      step,
      phi,
      quotaSlot: slot,
      rank: out.length,
      stats,
      rootSeedId: m.rootSeedId,
      depth: m.depth,
    });
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Injection and pruning

/**
 * How many queued candidates one injection may take: floor(β·activeSize) (with a 1e-9 guard
 * against binary rounding, so 0.29·100 gives 29), at least 1 when the queue is non-empty, at most
 * the queue and P_max.
 */
export function injectionCap(
  activeSize: number,
  share: number,
  queued: number,
  generatedCap: number,
): number {
  if (queued <= 0 || share <= 0) return 0;
  const byShare = Math.max(1, Math.floor(share * activeSize + 1e-9));
  return Math.min(byShare, queued, generatedCap);
}

export interface InjectionPlan {
  /** Whether the step is an injection boundary (nothing is planned otherwise). */
  boundary: boolean;
  inject: InjectDecision[];
  prune: PruneDecision[];
  discard: DiscardDecision[];
  /** The injection cap in force: floor(β·active), at least 1, at most the queue and P_max. */
  injectionCap: number;
  /** P_max in force. */
  generatedCap: number;
  /** Generated tasks after the injection, before pruning (PoolPruned.generatedBefore). */
  generatedBefore: number;
  /** Pool version after the change set (the current version when it is empty). */
  newVersion: number;
}

interface PruneCandidate {
  taskId: string;
  /** Injected by this very plan: ranks after every member (so it is never pruned, see planInjection). */
  fresh: boolean;
  observedPhi: number | undefined;
  parentPhi: number;
  injectedAtStep: number;
}

function comparePrune(a: PruneCandidate, b: PruneCandidate): number {
  if (a.fresh !== b.fresh) return a.fresh ? 1 : -1;
  const ao = a.observedPhi !== undefined;
  const bo = b.observedPhi !== undefined;
  if (ao !== bo) return ao ? -1 : 1;
  if (ao && bo) return a.observedPhi! - b.observedPhi! || compareIds(a.taskId, b.taskId);
  return a.injectedAtStep - b.injectedAtStep || a.parentPhi - b.parentPhi || compareIds(a.taskId, b.taskId);
}

/** The injection and pruning change set at a step (empty unless the step is an injection boundary). */
export function planInjection(
  pool: PoolState,
  step: number,
  cfg: Pick<CampaignConfig, 'pool'> & {
    ablation?: Partial<Pick<CampaignConfig['ablation'], 'injection' | 'pool'>>;
  },
  phiByTask?: TaskLookup<number>,
): InjectionPlan {
  const cap = cfg.pool.generatedCap;
  const generatedNow = generatedCount(pool);
  const empty: InjectionPlan = {
    boundary: false,
    inject: [],
    prune: [],
    discard: [],
    injectionCap: 0,
    generatedCap: cap,
    generatedBefore: generatedNow,
    newVersion: pool.version,
  };
  if (!isInjectionBoundary(step, cfg) || cfg.ablation?.injection === false) return empty;

  const poolVersion = pool.version + 1;
  const queue = [...pool.queue].sort(compareQueued);
  const memberIds = new Set(pool.members.map((m) => m.taskId));
  const taken = new Set<string>();
  const fresh: QueuedCandidate[] = [];
  const discard: DiscardDecision[] = [];
  for (const q of queue) {
    if (memberIds.has(q.taskId) || taken.has(q.taskId)) {
      discard.push({
        kind: 'discard',
        candidateId: q.candidateId,
        taskId: q.taskId,
        reason: 'duplicate-task',
        step,
      });
      continue;
    }
    taken.add(q.taskId);
    fresh.push(q);
  }
  const injectionCapNow = injectionCap(pool.members.length, cfg.pool.injectionShare, fresh.length, cap);
  const inject: InjectDecision[] = fresh.slice(0, injectionCapNow).map((q) => ({
    kind: 'inject',
    candidateId: q.candidateId,
    taskId: q.taskId,
    category: q.category,
    parents: [...q.parents],
    rootSeedId: q.rootSeedId,
    depth: q.depth,
    parentPhi: q.parentPhi,
    step,
    poolVersion,
  }));

  const generatedBefore = generatedNow + inject.length;
  const excess = generatedBefore - cap;
  const prune: PruneDecision[] = [];
  if (excess > 0) {
    const ranked: PruneCandidate[] = [];
    for (const m of pool.members) {
      if (m.origin !== 'generated') continue;
      const p = lookUp(phiByTask, m.taskId) ?? m.lastStats?.phi;
      ranked.push({
        taskId: m.taskId,
        fresh: false,
        observedPhi: p !== undefined && Number.isFinite(p) ? p : undefined,
        parentPhi: m.parentPhi ?? 0,
        injectedAtStep: m.injectedAtStep,
      });
    }
    for (const d of inject) {
      ranked.push({
        taskId: d.taskId,
        fresh: true,
        observedPhi: undefined,
        parentPhi: d.parentPhi,
        injectedAtStep: step,
      });
    }
    ranked.sort(comparePrune);
    for (const r of ranked.slice(0, excess)) {
      const observed = r.observedPhi !== undefined;
      prune.push({
        kind: 'prune',
        taskId: r.taskId,
        phi: observed ? r.observedPhi! : r.parentPhi,
        observed,
        step,
        poolVersion,
      });
    }
  }
  const changed = inject.length + prune.length > 0;
  return {
    boundary: true,
    inject,
    prune,
    discard,
    injectionCap: injectionCapNow,
    generatedCap: cap,
    generatedBefore,
    newVersion: changed ? poolVersion : pool.version,
  };
}

/**
 * The decisions of a plan in the order they are applied (and appended as events): discards, then
 * prunes, then injections, so that even event by event the pool never holds more than P_max
 * generated tasks after a boundary (a plan never prunes what it injects).
 */
export function planDecisions(plan: InjectionPlan): PoolDecision[] {
  return [...plan.discard, ...plan.prune, ...plan.inject];
}
