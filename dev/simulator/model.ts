// A SIMULATED GRPO policy, for tests, the demo and experiments only — not a trainer. Each task has
// a latent difficulty; the policy has a latent skill per API class. A rollout of K=16 attempts a
// task turn by turn; its progress reward is the share of turns solved. Learning per step grows
// with the group's reward variance, so boundary tasks teach most and mastered or hopeless ones
// nothing — the dynamics the RODS method exploits. Pure and deterministic for a seed.

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

/** A 32-bit hash of a string (FNV-1a), for stable per-task values. */
export function hash32(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h >>> 0;
}

/** Deterministic generator in [0, 1) (mulberry32). */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
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
