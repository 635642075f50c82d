// A SIMULATED ablation of the curriculum: the simulated policy of dev/simulator/model.ts trained
// for N steps under three pool policies on the same seed tasks.
// - static: the pool never changes; every step trains on all seeds.
// - rods: the paper's loop through the same step decider as the live pipeline (planStep,
//   domain/step-plan.ts): per step, train on the active pool and fold each group into its
//   statistics (domain/task-stats applyGroup), then planStep observes them, queues the children
//   of the previous step's seeds, retires, selects seeds and injects at the injection cadence.
// - random-seed: the same loop, but the seeds are ranked uniformly at random (seeded RNG) among
//   the active tasks out of cooldown, whatever their band or φ, under the same capacity and quotas
//   (planStep's seed-ranking option).
// A selected seed yields one synthesized child one step later: id `<parent>~s<step>` (step of the
// selection), the parent's category, classes and turns, difficulty childDifficulty(parent, id).
// Pure and deterministic for a seed: no I/O, no clock. Not evidence about a real model.
import {
  type CampaignConfig,
  type CampaignConfigInput,
  parseCampaignConfig,
} from '../../domain/campaign-config.js';
import { candidateId } from '../../domain/ids.js';
import type { SelectDecision } from '../../domain/pool/decisions.js';
import { applyDecisions } from '../../domain/pool/evolve.js';
import { inCooldown, type RankedSeed, type SeedRanking, seedTasks } from '../../domain/pool/policy.js';
import { EMPTY_POOL, type PoolState } from '../../domain/pool/state.js';
import { planStep, type StepCandidate } from '../../domain/step-plan.js';
import { applyGroup, statsRecord, type TaskState } from '../../domain/task-stats.js';
import type { TaskStats } from '../../schemas/types.generated.js';
import {
  childDifficulty,
  hash32,
  learn,
  rng,
  rolloutGroup,
  type SimPolicy,
  type SimTask,
  seedDifficulty,
} from './model.js';

export const POLICIES = ['rods', 'static', 'random-seed'] as const;
export type ExperimentPolicy = (typeof POLICIES)[number];

export function isExperimentPolicy(s: string): s is ExperimentPolicy {
  return (POLICIES as readonly string[]).includes(s);
}

/** The API classes of the BFCL multi-turn categories (executor/bfcl.py CLASS_MODULES). */
export const BFCL_CLASSES: readonly string[] = [
  'GorillaFileSystem',
  'MathAPI',
  'MessageAPI',
  'TwitterAPI',
  'TicketAPI',
  'TradingBot',
  'TravelAPI',
  'VehicleControlAPI',
];

export const CATEGORIES: readonly string[] = ['base', 'miss_func', 'miss_param', 'long_context'];

export const DEFAULT_LEARNING_RATE = 0.01;

/** Skill of a class the policy has not trained on (model.ts's default). */
const INITIAL_SKILL = 0.3;

export interface ExperimentTask extends SimTask {
  category: string;
}

/**
 * Synthetic BFCL-like seed tasks: `<category>_<i>` for each of the 4 categories, 1–2 distinct
 * classes drawn from the 8 BFCL classes, 2–5 turns (seeded RNG), difficulty seedDifficulty(id).
 */
export function makeSeedTasks(perCategory: number, seed: number): ExperimentTask[] {
  const r = rng(hash32(`seeds:${seed}`));
  const out: ExperimentTask[] = [];
  for (const category of CATEGORIES) {
    for (let i = 0; i < perCategory; i++) {
      const taskId = `${category}_${i}`;
      const first = BFCL_CLASSES[Math.floor(r() * BFCL_CLASSES.length)]!;
      const classes = [first];
      if (r() < 0.5) {
        const second = BFCL_CLASSES[Math.floor(r() * BFCL_CLASSES.length)]!;
        if (second !== first) classes.push(second);
      }
      const turns = 2 + Math.floor(r() * 4);
      out.push({ taskId, category, classes, turns, difficulty: seedDifficulty(taskId) });
    }
  }
  return out;
}

/** Whether every reward of a group is the same (the group carries no GRPO advantage). */
export function isZeroVariance(rewards: readonly number[]): boolean {
  return rewards.every((x) => x === rewards[0]);
}

/** Share of zero-variance groups among the groups (0 for no group). */
export function zeroVarianceShare(groups: readonly (readonly number[])[]): number {
  if (groups.length === 0) return 0;
  return groups.filter(isZeroVariance).length / groups.length;
}

/** Mean skill over the 8 BFCL classes (a class never trained has its initial skill). */
export function meanSkill(policy: SimPolicy): number {
  return BFCL_CLASSES.reduce((a, c) => a + (policy.skill[c] ?? INITIAL_SKILL), 0) / BFCL_CLASSES.length;
}

export interface ExperimentOptions {
  policies?: readonly ExperimentPolicy[];
  /** Training steps (default 30). */
  steps?: number;
  /** Seed tasks per category (default 100: 400 seeds). */
  seedsPerCategory?: number;
  /** Seed of the seed tasks, the rollouts and random-seed's draws (default 1). */
  seed?: number;
  /** Rollouts per task, GRPO group size K (default 16). */
  k?: number;
  /**
   * Per-group learning rate of the simulated policy (default 0.01). model.ts learns once per
   * group; with 400+ groups a step, the live simulated trainer's 0.1 (sized for small demo pools)
   * drives every class's skill to ~1 within a few steps, after which skill per rollout only
   * measures the rollout count.
   */
  learningRate?: number;
  /** Campaign config (defaults: the paper's, as parseCampaignConfig gives them). */
  config?: CampaignConfigInput;
}

export interface PolicyResult {
  policy: ExperimentPolicy;
  steps: number;
  rollouts: number;
  groups: number;
  zeroVarianceGroups: number;
  zeroVarianceShare: number;
  skillStart: number;
  skillEnd: number;
  /** (skillEnd − skillStart) / (rollouts / 1000). */
  skillGainPer1kRollouts: number;
  finalPoolSize: number;
  /** Generated tasks injected over the run. */
  generated: number;
  /** Generated tasks in the final pool. */
  generatedInPool: number;
  selected: number;
  retired: { mastered: number; burnIn: number };
  pruned: number;
  /** Final pool, task ids in order (for inspection and tests). */
  finalPool: string[];
}

/** The state of one policy's run: the pool and the simulated policy. */
interface RunState {
  pool: PoolState;
  policy: SimPolicy;
}

/**
 * random-seed's ranking: the active tasks observed at least once and out of cooldown, whatever
 * their band or φ, in a uniform random order (Fisher–Yates with the seeded generator). Selection
 * then applies the same capacity and quotas as for rods.
 */
function randomRanking(draw: () => number): SeedRanking {
  return (pool, _stats, step, cfg) => {
    const eligible: RankedSeed[] = [];
    for (const m of pool.members) {
      if (!m.lastStats || inCooldown(m.lastSelectedStep, step, cfg.selection.cooldownSteps)) continue;
      eligible.push({ member: m, stats: m.lastStats, phi: m.lastStats.phi });
    }
    for (let i = eligible.length - 1; i > 0; i--) {
      const j = Math.floor(draw() * (i + 1));
      [eligible[i], eligible[j]] = [eligible[j]!, eligible[i]!];
    }
    return eligible;
  };
}

/** One policy's run over the seed tasks. */
export function runPolicy(
  policyName: ExperimentPolicy,
  seeds: readonly ExperimentTask[],
  opts: { steps: number; seed: number; k: number; learningRate: number; config: CampaignConfig },
): PolicyResult {
  const cfg = opts.config;
  const tasks = new Map<string, ExperimentTask>(seeds.map((t) => [t.taskId, t]));
  const taskStates = new Map<string, TaskState>();
  const draw = rng(hash32(`random-seed:${opts.seed}`));
  const run: RunState = {
    pool: EMPTY_POOL,
    policy: { skill: {}, learningRate: opts.learningRate },
  };
  run.pool = applyDecisions(run.pool, seedTasks(run.pool, seeds, 0));
  const skillStart = meanSkill(run.policy);
  const ranking = policyName === 'random-seed' ? randomRanking(draw) : undefined;

  let groups = 0;
  let zero = 0;
  let rollouts = 0;
  let generated = 0;
  let selectedCount = 0;
  let pruned = 0;
  const retired = { mastered: 0, burnIn: 0 };
  let pending: SelectDecision[] = [];

  for (let step = 1; step <= opts.steps; step++) {
    // Train on the active pool (task-id order) and fold each group into its statistics.
    const stats = new Map<string, TaskStats>();
    for (const m of run.pool.members) {
      const task = tasks.get(m.taskId)!;
      const rewards = rolloutGroup(run.policy, task, opts.k, hash32(`${opts.seed}:${step}:${m.taskId}`));
      run.policy = learn(run.policy, task, rewards);
      groups++;
      rollouts += rewards.length;
      if (isZeroVariance(rewards)) zero++;
      if (policyName === 'static') continue;
      const applied = applyGroup(taskStates.get(m.taskId), rewards, step, cfg.detector);
      taskStates.set(m.taskId, applied.state);
      stats.set(m.taskId, statsRecord(applied.state));
    }
    if (policyName === 'static') continue;

    // The previous step's seeds each yield one synthesized child, queued for injection.
    const candidates: StepCandidate[] = [];
    for (const s of pending) {
      const parent = tasks.get(s.taskId)!;
      const taskId = candidateId(s.taskId, s.step);
      tasks.set(taskId, {
        taskId,
        category: parent.category,
        classes: [...parent.classes],
        turns: parent.turns,
        difficulty: childDifficulty(parent.difficulty, taskId),
      });
      candidates.push({
        candidateId: `cand-${taskId}`,
        taskId,
        category: s.category,
        parents: [s.taskId],
        parentPhi: s.phi,
        seedLineage: { rootSeedId: s.rootSeedId, depth: s.depth },
      });
    }

    const plan = planStep({
      pool: run.pool,
      step,
      config: cfg,
      stats,
      candidates,
      selection: { ranking },
    });
    run.pool = plan.state;
    for (const d of plan.retired) {
      if (d.rule === 'mastered') retired.mastered++;
      else if (d.rule === 'burn_in') retired.burnIn++;
    }
    selectedCount += plan.selected.length;
    pending = plan.selected;
    generated += plan.injection.inject.length;
    pruned += plan.injection.prune.length;
  }

  const skillEnd = meanSkill(run.policy);
  const members = run.pool.members;
  return {
    policy: policyName,
    steps: opts.steps,
    rollouts,
    groups,
    zeroVarianceGroups: zero,
    zeroVarianceShare: groups ? zero / groups : 0,
    skillStart,
    skillEnd,
    skillGainPer1kRollouts: rollouts ? (skillEnd - skillStart) / (rollouts / 1000) : 0,
    finalPoolSize: members.length,
    generated,
    generatedInPool: members.filter((m) => m.origin === 'generated').length,
    selected: selectedCount,
    retired,
    pruned,
    finalPool: members.map((m) => m.taskId),
  };
}

export type ExperimentReport = Partial<Record<ExperimentPolicy, PolicyResult>>;

/** Runs each policy on the same seed tasks (and the same rollout seeds per task and step). */
export function runExperiment(opts: ExperimentOptions = {}): ExperimentReport {
  const steps = opts.steps ?? 30;
  const perCategory = opts.seedsPerCategory ?? 100;
  const seed = opts.seed ?? 1;
  const config = parseCampaignConfig(opts.config ?? {});
  const k = opts.k ?? config.rolloutsPerTask;
  const seeds = makeSeedTasks(perCategory, seed);
  const out: ExperimentReport = {};
  for (const p of opts.policies ?? POLICIES) {
    out[p] = runPolicy(p, seeds, {
      steps,
      seed,
      k,
      learningRate: opts.learningRate ?? DEFAULT_LEARNING_RATE,
      config,
    });
  }
  return out;
}
