// A TOY simulated policy for the loop harness's integration tests only (dev/harness/loop.ts):
// skill per API class, learning fast so that bands move within a few steps. Not the simulated
// trainer's model (model.ts), and no evidence about anything. Pure and deterministic for a seed.
import { hash32, rng } from './model.js';

export { hash32 };

export interface SimTask {
  taskId: string;
  classes: string[];
  turns: number;
  /** Latent difficulty in [0, 1]. */
  difficulty: number;
}

export interface SimPolicy {
  /** Latent skill per API class, in [0, 1]. */
  skill: Record<string, number>;
  learningRate: number;
}

/** Difficulty of a human seed: spread over [0.05, 0.95] by its id. */
export function seedDifficulty(taskId: string): number {
  return 0.05 + 0.9 * (hash32(`difficulty:${taskId}`) / 2 ** 32);
}

/** A synthesized task inherits its parent's classes with a difficulty near the parent's. */
export function childDifficulty(parentDifficulty: number, taskId: string): number {
  const jitter = (hash32(`child:${taskId}`) / 2 ** 32 - 0.5) * 0.2;
  return Math.min(0.98, Math.max(0.02, parentDifficulty + jitter));
}

function skillFor(policy: SimPolicy, task: SimTask): number {
  if (task.classes.length === 0) return 0.5;
  return task.classes.reduce((a, c) => a + (policy.skill[c] ?? 0.3), 0) / task.classes.length;
}

/** Chance to solve one turn: logistic in skill minus difficulty. */
export function turnSuccess(policy: SimPolicy, task: SimTask): number {
  return 1 / (1 + Math.exp(-10 * (skillFor(policy, task) - task.difficulty)));
}

/** K rollouts: each reward is the share of turns solved (a progress reward in [0, 1]). */
export function rolloutGroup(policy: SimPolicy, task: SimTask, k: number, seed: number): number[] {
  const r = rng(seed);
  const p = turnSuccess(policy, task);
  return Array.from({ length: k }, () => {
    let solved = 0;
    for (let t = 0; t < task.turns; t++) if (r() < p) solved++;
    return solved / task.turns;
  });
}

/** One GRPO update from a group: skill on the task's classes grows with the group's reward variance. */
export function learn(policy: SimPolicy, task: SimTask, rewards: readonly number[]): SimPolicy {
  const mean = rewards.reduce((a, b) => a + b, 0) / rewards.length;
  const variance = rewards.reduce((a, x) => a + (x - mean) ** 2, 0) / rewards.length;
  const skill = { ...policy.skill };
  for (const c of task.classes) {
    const s = skill[c] ?? 0.3;
    skill[c] = Math.min(1, s + policy.learningRate * variance * (1 - s));
  }
  return { ...policy, skill };
}
