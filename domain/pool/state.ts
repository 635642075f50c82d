// The training pool's state: its members, the injection queue and the version. Plain JSON (arrays,
// no Maps), so it crosses Temporal's payload converter and continue-as-new unchanged. Members are
// kept in task-id order and the queue in injection order, so every fold of the same decisions
// gives the same state (see evolve.ts).
import type { TaskStats } from '../../schemas/types.generated.js';
import type { Lineage } from '../lineage.js';

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
  /** Step of the first observed group that put the task in the boundary band. */
  firstBoundaryStep?: number;
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
  /**
   * Generated tasks, ever, that a reward group put in the boundary band within
   * pool.usefulWithinSteps of their injection (absent: none yet, or a state from before).
   */
  useful?: number;
}

export const EMPTY_POOL: Readonly<PoolState> = Object.freeze({ version: 0, members: [], queue: [] });

/** Per-task values: a Map, or a plain object keyed by task id (own properties only). */
export type TaskLookup<T> = ReadonlyMap<string, T> | Readonly<Record<string, T>>;

/** The value for a task in a lookup (undefined when absent or when there is no lookup). */
export function lookUp<T>(l: TaskLookup<T> | undefined, taskId: string): T | undefined {
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
