// The decisions that change the pool (or record what a change depended on). Policy functions
// (policy.ts) produce them, applyDecisions (evolve.ts) folds them, and the curriculum activity
// appends each as an event. Every membership decision (seed, inject, retire, prune) carries the
// pool version it produces.
import type { TaskStats } from '../../schemas/types.generated.js';
import type { QueuedCandidate, RetirementRule } from './state.js';

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

/** A queued candidate entering the pool: its queue entry, the step and the pool version it makes. */
export interface InjectDecision extends Omit<QueuedCandidate, 'queuedAtStep'> {
  kind: 'inject';
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
  /** A generated task first seen in the boundary band within pool.usefulWithinSteps of its injection. */
  useful?: true;
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

export type MembershipDecision = SeedDecision | InjectDecision | RetireDecision | PruneDecision;

export function isMembershipDecision(d: PoolDecision): d is MembershipDecision {
  return d.kind === 'seed' || d.kind === 'inject' || d.kind === 'retire' || d.kind === 'prune';
}

export class PoolDecisionError extends Error {
  override name = 'PoolDecisionError';
}
