// A SIMULATED GRPO trainer's policy, for the demo and `npm run dev -- experiment` only — not a trainer and
// no evidence about a real model. Assumptions (dev/simulator/README.md), values with reasons in
// parameters.ts. In short:
// - a task's per-turn success is sigmoid(z), z = shared skill (mean over its API classes + its
//   category's structure skill) + its own memorisation − its latent difficulty;
// - a rollout solves turns in order until the first failure; its progress reward is the share of
//   turns solved (BFCL multi-turn: a failed turn leaves the state wrong for the next ones);
// - a group's update has the size of its reward standard deviation (zero-variance: no update);
//   it goes mostly to the task itself (memorisation) and a little to its classes and category,
//   which is all a held-out task can gain from.
// Pure and deterministic for a seed.

import { fnv1a, mulberry32 } from '../../domain/random.js';
import type { SimParameters } from './parameters.js';

export interface SimTask {
  taskId: string;
  /** BFCL category (base, miss_func, miss_param, long_context): the task's structure. */
  category: string;
  /** API classes involved. */
  classes: readonly string[];
  /** User turns. */
  turns: number;
  /** Latent difficulty (logit) against the untrained policy. */
  difficulty: number;
}

/** The policy's learned state: shared skills and per-task memorisation (logits, 0 untrained). */
export interface ModelState {
  classSkill: Map<string, number>;
  structureSkill: Map<string, number>;
  memo: Map<string, number>;
}

export type LearnParameters = Pick<
  SimParameters,
  'learningRate' | 'memorisation' | 'classTransfer' | 'structureTransfer'
>;

export function newModel(): ModelState {
  return { classSkill: new Map(), structureSkill: new Map(), memo: new Map() };
}

export function cloneModel(m: ModelState): ModelState {
  return {
    classSkill: new Map(m.classSkill),
    structureSkill: new Map(m.structureSkill),
    memo: new Map(m.memo),
  };
}

/** A 32-bit hash of a string (FNV-1a), for stable per-task values. */
export const hash32 = fnv1a;

/** Deterministic generator in [0, 1) (mulberry32). */
export const rng = mulberry32;

/** A standard normal draw (Box–Muller) from a [0, 1) generator. */
export function normal(draw: () => number): number {
  const u = 1 - draw();
  return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * draw());
}

export const sigmoid = (z: number): number => 1 / (1 + Math.exp(-z));
export const logit = (p: number): number => Math.log(p / (1 - p));

/** A seed's latent difficulty: normal(mean, sd) drawn from its id (the same everywhere). */
export function seedDifficulty(taskId: string, p: Pick<SimParameters, 'difficultyMean' | 'difficultySd'>) {
  return p.difficultyMean + p.difficultySd * normal(rng(hash32(`difficulty:${taskId}`)));
}

/** What the task shares with others: the mean skill of its classes plus its category's. */
export function sharedSkill(m: ModelState, t: Pick<SimTask, 'classes' | 'category'>): number {
  let c = 0;
  for (const k of t.classes) c += m.classSkill.get(k) ?? 0;
  return (t.classes.length ? c / t.classes.length : 0) + (m.structureSkill.get(t.category) ?? 0);
}

/** Logit of the per-turn success. */
export function taskLogit(m: ModelState, t: SimTask): number {
  return sharedSkill(m, t) + (m.memo.get(t.taskId) ?? 0) - t.difficulty;
}

export function turnSuccess(m: ModelState, t: SimTask): number {
  return sigmoid(taskLogit(m, t));
}

/** Chance that a rollout solves every turn (the task's success as BFCL's checker counts it). */
export function taskSuccess(m: ModelState, t: SimTask): number {
  return turnSuccess(m, t) ** t.turns;
}

/** Expected progress reward at per-turn success p over `turns` turns: (p + p² + … + pᵀ) / T. */
export function expectedReward(p: number, turns: number): number {
  let s = 0;
  let q = 1;
  for (let i = 0; i < turns; i++) {
    q *= p;
    s += q;
  }
  return s / turns;
}

/** The per-turn success whose expected progress reward is `mean` (bisection; clamped to [0.01, 0.99]). */
export function successForReward(mean: number, turns: number): number {
  let lo = 0.01;
  let hi = 0.99;
  if (expectedReward(lo, turns) >= mean) return lo;
  if (expectedReward(hi, turns) <= mean) return hi;
  for (let i = 0; i < 40; i++) {
    const mid = (lo + hi) / 2;
    if (expectedReward(mid, turns) < mean) lo = mid;
    else hi = mid;
  }
  return (lo + hi) / 2;
}

/** K rollouts; each solves turns in order until the first failure and scores the share solved. */
export function rolloutGroup(m: ModelState, t: SimTask, k: number, seed: number): number[] {
  const r = rng(seed);
  const p = turnSuccess(m, t);
  return Array.from({ length: k }, () => {
    let solved = 0;
    while (solved < t.turns && r() < p) solved++;
    return solved / t.turns;
  });
}

/** Population standard deviation of a group's rewards. */
export function groupStd(rewards: readonly number[]): number {
  if (rewards.length === 0) return 0;
  const mean = rewards.reduce((a, b) => a + b, 0) / rewards.length;
  return Math.sqrt(rewards.reduce((a, x) => a + (x - mean) ** 2, 0) / rewards.length);
}

/**
 * One GRPO update from a group, in place: size learningRate × reward std, to the task itself
 * (memorisation), to each of its classes and to its category. A zero-variance group carries no
 * advantage and changes nothing. Returns the size of the update.
 */
export function learn(m: ModelState, t: SimTask, rewards: readonly number[], p: LearnParameters): number {
  const delta = p.learningRate * groupStd(rewards);
  if (delta === 0) return 0;
  m.memo.set(t.taskId, (m.memo.get(t.taskId) ?? 0) + p.memorisation * delta);
  for (const c of t.classes) m.classSkill.set(c, (m.classSkill.get(c) ?? 0) + p.classTransfer * delta);
  m.structureSkill.set(t.category, (m.structureSkill.get(t.category) ?? 0) + p.structureTransfer * delta);
  return delta;
}

/**
 * The batch of a step: the `b` tasks with the smallest hash of (key, task id). Every policy with
 * the same key draws the same tasks among those its pool shares, and the same count.
 */
export function sampleBatch<T extends { taskId: string }>(pool: readonly T[], b: number, key: string): T[] {
  if (pool.length <= b) return [...pool];
  return pool
    .map((t) => ({ t, h: hash32(`${key}:${t.taskId}`) }))
    .sort((x, y) => x.h - y.h || (x.t.taskId < y.t.taskId ? -1 : 1))
    .slice(0, b)
    .map((x) => x.t);
}

/**
 * A child's difficulty: the generator aims at the parent's measured mean reward (the per-turn
 * success giving it), missing by `noise` logits; the child is new text, so it starts without
 * memorisation and with the parent's shared skill.
 */
export function aimedDifficulty(
  m: ModelState,
  child: Pick<SimTask, 'classes' | 'category' | 'turns'>,
  measuredMean: number,
  noise: number,
): number {
  return sharedSkill(m, child) - (logit(successForReward(measuredMean, child.turns)) + noise);
}

/** One trained group of a simulated step. */
export interface TrainedGroup<T extends SimTask> {
  task: T;
  rewards: number[];
}

/**
 * One GRPO step of the simulated policy, as the trainer and the experiment both run it: sample
 * the batch, roll each task's group of k and learn from it before the next task is rolled.
 */
export function trainStep<T extends SimTask>(
  m: ModelState,
  pool: readonly T[],
  batchTasks: number,
  k: number,
  p: LearnParameters,
  keys: { batch: string; rollouts: (taskId: string) => string },
): TrainedGroup<T>[] {
  return sampleBatch(pool, batchTasks, keys.batch).map((task) => {
    const rewards = rolloutGroup(m, task, k, hash32(keys.rollouts(task.taskId)));
    learn(m, task, rewards, p);
    return { task, rewards };
  });
}
