// The training pool and the curriculum policy over it: retirement, seed selection, injection and
// pruning. Every function here is pure and deterministic (no I/O, clock or randomness; iteration
// in task-id order; ties broken by task id), so the live campaign workflow and replay compute and
// fold the same decisions. The state is plain JSON (arrays, no Maps), so it can cross Temporal's
// payload converter and continue-as-new unchanged.
//
// Decisions documented here (DESIGN.md §2 leaves them open):
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
//   They are ranked by φ (highest first, ties by task id) and taken greedily while the category's
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
//   produces. A planning function stamps its whole change set with pool.version + 1, so the
//   version increments once per applied change set however its events are grouped on replay.
//   applyDecisions is deterministic (same pool, same decisions: same pool). A decision whose
//   effect is already in the pool is a no-op (a re-delivered change set changes nothing); one that
//   skips a version, or would change the pool under an older version, is refused.
import type { TaskStats } from '../schemas/types.generated.js';
import { bandOf, phi as phiOf } from './band.js';
import { type CampaignConfig, isInjectionBoundary } from './campaign-config.js';
import { childLineage, type Lineage, seedLineage } from './lineage.js';

export type { TaskStats } from '../schemas/types.generated.js';
export { childLineage, type Lineage, LineageError, seedLineage } from './lineage.js';

export type Origin = 'seed' | 'generated';
export type RetirementRule = 'mastered' | 'burn_in' | 'manual';

export interface PoolMember {
  taskId: string;
  origin: Origin;
  category: string;
  /** Lineage parents, seed first; empty for a human seed. */
  parents: string[];
  rootSeedId: string;
  /** 0 for a human seed. */
  depth: number;
  /** Step at which the task entered the pool (seeded or injected). */
  injectedAtStep: number;
  /** Generated tasks: the candidate that became this task. */
  candidateId?: string;
  /** Generated tasks: φ of the seed when it was selected (ranks the task until it is observed). */
  parentPhi?: number;
  /** Step of the first observed reward group (set by the first `observe`). */
  firstObservedStep?: number;
  lastStats?: TaskStats;
  /** Step at which the task was last selected as a seed (cooldown). */
  lastSelectedStep?: number;
}

/** A validated candidate waiting for the next injection boundary. */
export interface QueuedCandidate {
  candidateId: string;
  /** Id the task gets when injected. */
  taskId: string;
  category: string;
  /** Lineage parents, seed first. */
  parents: string[];
  rootSeedId: string;
  depth: number;
  /** φ of the seed when it was selected. */
  parentPhi: number;
  queuedAtStep: number;
}

export interface PoolState {
  /** Incremented once per applied change set of memberships. */
  version: number;
  /** Sorted by task id, unique. */
  members: PoolMember[];
  /** In injection order (see compareQueued). */
  queue: QueuedCandidate[];
}

export const EMPTY_POOL: Readonly<PoolState> = Object.freeze({ version: 0, members: [], queue: [] });

// ---------------------------------------------------------------------------------------------
// Decisions

export interface SeedDecision {
  kind: 'seed';
  taskId: string;
  category: string;
  step: number;
  poolVersion: number;
}

export interface SelectDecision {
  kind: 'select';
  taskId: string;
  category: string;
  step: number;
  phi: number;
  /** Slot in the category's per-step quota, from 0. */
  quotaSlot: number;
  /** Position among this step's selections, from 0 (φ order). */
  rank: number;
  stats: TaskStats;
  /** Lineage of the seed (the candidate's lineage derives from it even if the seed retires meanwhile). */
  rootSeedId: string;
  depth: number;
}

export interface EnqueueDecision {
  kind: 'enqueue';
  candidate: QueuedCandidate;
}

export interface InjectDecision {
  kind: 'inject';
  candidateId: string;
  taskId: string;
  category: string;
  parents: string[];
  rootSeedId: string;
  depth: number;
  parentPhi: number;
  step: number;
  poolVersion: number;
}

export interface RetireDecision {
  kind: 'retire';
  taskId: string;
  rule: RetirementRule;
  /** Statistics at retirement; null for a task never observed (manual retirement only). */
  stats: TaskStats | null;
  step: number;
  poolVersion: number;
}

export interface PruneDecision {
  kind: 'prune';
  taskId: string;
  /** φ the task was ranked by: its observed φ, or its parent's φ when not observed yet. */
  phi: number;
  observed: boolean;
  step: number;
  poolVersion: number;
}

export interface DiscardDecision {
  kind: 'discard';
  candidateId: string;
  taskId: string;
  reason: 'duplicate-task';
  step: number;
}

/** Records a task's latest statistics on its member (not a membership change). */
export interface ObserveDecision {
  kind: 'observe';
  taskId: string;
  stats: TaskStats;
}

export type PoolDecision =
  | SeedDecision
  | SelectDecision
  | EnqueueDecision
  | InjectDecision
  | RetireDecision
  | PruneDecision
  | DiscardDecision
  | ObserveDecision;

export class PoolDecisionError extends Error {
  override name = 'PoolDecisionError';
}

// ---------------------------------------------------------------------------------------------
// Lookups and ordering

/** Per-task values: a Map, or a plain object keyed by task id (own properties only). */
export type TaskLookup<T> = ReadonlyMap<string, T> | Readonly<Record<string, T>>;

function look<T>(l: TaskLookup<T> | undefined, taskId: string): T | undefined {
  if (!l) return undefined;
  if (
    typeof (l as ReadonlyMap<string, T>).get === 'function' &&
    typeof (l as ReadonlyMap<string, T>).has === 'function'
  ) {
    return (l as ReadonlyMap<string, T>).get(taskId);
  }
  const r = l as Readonly<Record<string, T>>;
  return Object.hasOwn(r, taskId) ? r[taskId] : undefined;
}

/** Code-unit order of ids (the order of Array.prototype.sort), total and locale-free. */
export function compareIds(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Injection order of the queue: step queued, then higher parent φ, then candidate id. */
export function compareQueued(a: QueuedCandidate, b: QueuedCandidate): number {
  return (
    a.queuedAtStep - b.queuedAtStep || b.parentPhi - a.parentPhi || compareIds(a.candidateId, b.candidateId)
  );
}

function statsFor(m: PoolMember, statsByTask: TaskLookup<TaskStats> | undefined): TaskStats | undefined {
  const s = look(statsByTask, m.taskId) ?? m.lastStats;
  return s && Number.isFinite(s.signal) ? s : undefined;
}

export function findMember(pool: PoolState, taskId: string): PoolMember | undefined {
  return pool.members.find((m) => m.taskId === taskId);
}

export function generatedCount(pool: PoolState): number {
  return pool.members.reduce((n, m) => n + (m.origin === 'generated' ? 1 : 0), 0);
}

/** The lineage of a pool member. */
export function memberLineage(m: PoolMember): Lineage {
  return { rootSeedId: m.rootSeedId, depth: m.depth };
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

export interface SelectOptions {
  /** Tasks with a synthesis run in flight: never selected. */
  inFlight?: Iterable<string>;
  /** Synthesis runs in flight (defaults to the number of distinct inFlight tasks). */
  runningSyntheses?: number;
}

/** A boundary task the ranking considered, whether or not it was selected (for explanations). */
export function boundaryRanking(
  pool: PoolState,
  statsByTask: TaskLookup<TaskStats> | undefined,
  cfg: Pick<CampaignConfig, 'detector'>,
): { member: PoolMember; stats: TaskStats; phi: number }[] {
  const out: { member: PoolMember; stats: TaskStats; phi: number }[] = [];
  for (const m of pool.members) {
    const s = statsFor(m, statsByTask);
    if (!s || bandOf(s.signal, cfg.detector) !== 'boundary') continue;
    out.push({ member: m, stats: s, phi: phiOf(s.signal) });
  }
  return out.sort((a, b) => b.phi - a.phi || compareIds(a.member.taskId, b.member.taskId));
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
  const used = new Map<string, number>();
  const out: SelectDecision[] = [];
  if (capacity === 0) return out;
  for (const { member: m, stats, phi } of boundaryRanking(pool, statsByTask, cfg)) {
    if (out.length >= capacity) break;
    if (inFlight.has(m.taskId)) continue;
    if (inCooldown(m.lastSelectedStep, step, sel.cooldownSteps)) continue;
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
  cfg: Pick<CampaignConfig, 'pool'>,
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
  if (!isInjectionBoundary(step, cfg)) return empty;

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
      const p = look(phiByTask, m.taskId) ?? m.lastStats?.phi;
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

// ---------------------------------------------------------------------------------------------
// Folding decisions

function isMembershipDecision(
  d: PoolDecision,
): d is SeedDecision | InjectDecision | RetireDecision | PruneDecision {
  return d.kind === 'seed' || d.kind === 'inject' || d.kind === 'retire' || d.kind === 'prune';
}

/**
 * The pool after the decisions, folded in order (the input is not modified). Deterministic;
 * decisions whose effect is already in the pool change nothing (a change set delivered twice has
 * the effect of one). Throws PoolDecisionError for a decision that skips a pool version, one that
 * would change the pool under an older version, the pruning of a human seed, or a generated
 * task without parents.
 */
export function applyDecisions(pool: PoolState, decisions: readonly PoolDecision[]): PoolState {
  let version = pool.version;
  const members = new Map<string, PoolMember>(pool.members.map((m) => [m.taskId, m]));
  let queue = pool.queue;
  let queueChanged = false;
  const removeQueued = (candidateId: string) => {
    const next = queue.filter((q) => q.candidateId !== candidateId);
    if (next.length !== queue.length) {
      queue = next;
      queueChanged = true;
    }
  };

  for (const d of decisions) {
    let stale = false;
    if (isMembershipDecision(d)) {
      if (!Number.isSafeInteger(d.poolVersion)) {
        throw new PoolDecisionError(`${d.kind} ${d.taskId}: pool version ${d.poolVersion} is not an integer`);
      }
      if (d.poolVersion > version + 1) {
        throw new PoolDecisionError(
          `${d.kind} ${d.taskId}: decision for pool version ${d.poolVersion} but the pool is at version ${version}; a change set is missing`,
        );
      }
      stale = d.poolVersion < version;
    }
    const staleChange = () => {
      if (stale) {
        throw new PoolDecisionError(
          `${d.kind} ${(d as { taskId: string }).taskId}: decision of pool version ${(d as { poolVersion: number }).poolVersion} would change the pool at version ${version}`,
        );
      }
    };
    switch (d.kind) {
      case 'seed': {
        const m = members.get(d.taskId);
        if (m) {
          if (m.origin !== 'seed') {
            throw new PoolDecisionError(`seed ${d.taskId}: the pool already holds it as a generated task`);
          }
          break;
        }
        staleChange();
        members.set(d.taskId, {
          taskId: d.taskId,
          origin: 'seed',
          category: d.category,
          parents: [],
          ...seedLineage(d.taskId),
          injectedAtStep: d.step,
        });
        break;
      }
      case 'inject': {
        removeQueued(d.candidateId);
        if (members.has(d.taskId)) break;
        staleChange();
        if (d.parents.length === 0) {
          throw new PoolDecisionError(`inject ${d.taskId}: a generated task needs its parents (seed first)`);
        }
        members.set(d.taskId, {
          taskId: d.taskId,
          origin: 'generated',
          category: d.category,
          parents: [...d.parents],
          rootSeedId: d.rootSeedId,
          depth: d.depth,
          injectedAtStep: d.step,
          candidateId: d.candidateId,
          parentPhi: d.parentPhi,
        });
        break;
      }
      case 'retire': {
        if (!members.has(d.taskId)) break;
        staleChange();
        members.delete(d.taskId);
        break;
      }
      case 'prune': {
        const m = members.get(d.taskId);
        if (!m) break;
        if (m.origin !== 'generated') {
          throw new PoolDecisionError(`prune ${d.taskId}: human seeds are never pruned`);
        }
        staleChange();
        members.delete(d.taskId);
        break;
      }
      case 'select': {
        const m = members.get(d.taskId);
        if (!m || (m.lastSelectedStep !== undefined && m.lastSelectedStep >= d.step)) break;
        members.set(d.taskId, { ...m, lastSelectedStep: d.step });
        break;
      }
      case 'enqueue': {
        const c = d.candidate;
        if (members.has(c.taskId) || queue.some((q) => q.candidateId === c.candidateId)) break;
        queue = [...queue, { ...c, parents: [...c.parents] }];
        queueChanged = true;
        break;
      }
      case 'discard':
        removeQueued(d.candidateId);
        break;
      case 'observe': {
        const m = members.get(d.taskId);
        if (!m) break;
        members.set(d.taskId, {
          ...m,
          lastStats: d.stats,
          firstObservedStep: m.firstObservedStep ?? d.stats.lastStep,
        });
        break;
      }
      default: {
        const never: never = d;
        throw new PoolDecisionError(`unknown decision ${JSON.stringify(never)}`);
      }
    }
    if (isMembershipDecision(d) && d.poolVersion > version) version = d.poolVersion;
  }

  return {
    version,
    members: [...members.values()].sort((a, b) => compareIds(a.taskId, b.taskId)),
    queue: queueChanged ? [...queue].sort(compareQueued) : [...pool.queue],
  };
}
