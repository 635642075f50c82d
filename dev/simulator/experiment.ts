// A SIMULATED comparison of pool policies (`npm run dev -- experiment`): the simulated GRPO trainer of
// model.ts trained under each policy on the same BFCL-like tasks, with the same rollout budget,
// scored on held-out tasks never trained on. Every policy is a campaign config's `ablation` and
// runs through the live pipeline's step decider (planStep, domain/step-plan.ts), so what is
// compared is what a campaign with that config would do. Parameters and their reasons:
// parameters.ts; assumptions: dev/simulator/README.md. Pure and deterministic for a seed.
//
// One run (policy, seed), per step:
//   1. the trainer samples B tasks of the active pool (sampleBatch: the same draw for every
//      policy among the tasks their pools share), K rollouts each, and learns from each group;
//   2. each group is folded into its task's statistics (domain/task-stats applyGroup);
//   3. each seed selected at the previous step has had its synthesis run: gates, flaws and the
//      judge decide whether a child is validated; a child aims at the seed's measured success;
//   4. planStep observes, queues the validated children, retires, selects and injects, under the
//      policy's ablation.
import {
  type CampaignConfig,
  type CampaignConfigInput,
  parseCampaignConfig,
} from '../../domain/campaign-config.js';
import { candidateId } from '../../domain/ids.js';
import type { SelectDecision } from '../../domain/pool/decisions.js';
import { applyDecisions } from '../../domain/pool/evolve.js';
import { seedTasks } from '../../domain/pool/policy.js';
import { EMPTY_POOL } from '../../domain/pool/state.js';
import { planStep, type StepCandidate } from '../../domain/step-plan.js';
import { applyGroup, statsRecord, type TaskState } from '../../domain/task-stats.js';
import type { TaskStats } from '../../schemas/types.generated.js';
import {
  aimedDifficulty,
  groupStd,
  hash32,
  newModel,
  normal,
  rng,
  type SimTask,
  taskSuccess,
  trainStep,
} from './model.js';
import { FLAWED_DIFFICULTY, PARAMETERS, type SimParameters } from './parameters.js';
import { ci95, type Interval, pairedCi95 } from './stats.js';

export type Ablation = CampaignConfig['ablation'];

/** A pool policy: the campaign config's ablation it stands for, and whether seeds get synthesized. */
export interface PolicySpec {
  ablation: Partial<Ablation>;
  /** Whether selected seeds are synthesized (static: the trainer's pool alone, no rods). */
  synthesis: boolean;
  what: string;
}

/** The policies by name (the mapping is documented in dev/simulator/README.md). */
export const POLICY_SPECS: Readonly<Record<string, PolicySpec>> = {
  static: {
    ablation: { injection: false, retirement: false },
    synthesis: false,
    what: 'the seeds only: nothing synthesized, injected or retired (a trainer without rods)',
  },
  'random-seed': {
    ablation: { selection: 'random' },
    synthesis: true,
    what: 'rods with seeds drawn at random among observed members (ablation.selection random)',
  },
  rods: { ablation: {}, synthesis: true, what: 'the method as published (all ablation switches on)' },
  'rods-no-retirement': {
    ablation: { retirement: false },
    synthesis: true,
    what: 'rods without retirement by rule (ablation.retirement false)',
  },
  'rods-static-pool': {
    ablation: { pool: 'static' },
    synthesis: true,
    what: "the paper's static-pool ablation: synthesis from the initial boundary once, injected once, then the pool frozen (ablation.pool static)",
  },
};

export const DEFAULT_POLICIES = ['static', 'random-seed', 'rods', 'rods-no-retirement', 'rods-static-pool'];

/** The policy that runs the `--config` file's own ablation. */
export const CONFIG_POLICY = 'config';

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

/**
 * User turns of BFCL v4 multi-turn base and long_context tasks (count per 200 by turns, from the
 * bfcl-eval data files); miss_func and miss_param tasks have one turn more (the turn that
 * brings the missing function or value).
 */
const BASE_TURNS: readonly [number, number][] = [
  [1, 3],
  [2, 40],
  [3, 50],
  [4, 50],
  [5, 43],
  [6, 12],
  [7, 2],
];
/** Share of BFCL multi-turn tasks with one involved class (65 of 200); the rest have two. */
const ONE_CLASS_SHARE = 65 / 200;

export interface ExperimentTask extends SimTask {
  /** A human seed (in the pool), a held-out task (never trained on), or a synthesized child. */
  split: 'train' | 'heldout' | 'generated';
}

export interface TaskSet {
  train: ExperimentTask[];
  heldOut: ExperimentTask[];
}

function drawTurns(u: number): number {
  let acc = 0;
  for (const [t, n] of BASE_TURNS) {
    acc += n / 200;
    if (u < acc) return t;
  }
  return BASE_TURNS[BASE_TURNS.length - 1]![0];
}

/**
 * BFCL-like tasks for a seed: per category, ids `<category>_<i>` for i < train + heldOut; the
 * first `trainPerCategory` are the pool's seeds, the rest held out. Classes, turns and
 * difficulty are drawn as the parameters and the BFCL data describe.
 */
export function makeTasks(
  seed: number,
  p: Pick<SimParameters, 'trainPerCategory' | 'heldOutPerCategory' | 'difficultyMean' | 'difficultySd'>,
): TaskSet {
  const r = rng(hash32(`tasks:${seed}`));
  const out: TaskSet = { train: [], heldOut: [] };
  for (const category of CATEGORIES) {
    for (let i = 0; i < p.trainPerCategory + p.heldOutPerCategory; i++) {
      const first = BFCL_CLASSES[Math.floor(r() * BFCL_CLASSES.length)]!;
      const classes = [first];
      if (r() >= ONE_CLASS_SHARE) {
        const others = BFCL_CLASSES.filter((c) => c !== first);
        classes.push(others[Math.floor(r() * others.length)]!);
      }
      const turns = drawTurns(r()) + (category === 'miss_func' || category === 'miss_param' ? 1 : 0);
      const difficulty = p.difficultyMean + p.difficultySd * normal(r);
      const split = i < p.trainPerCategory ? 'train' : 'heldout';
      const t: ExperimentTask = { taskId: `${category}_${i}`, category, classes, turns, difficulty, split };
      (split === 'train' ? out.train : out.heldOut).push(t);
    }
  }
  return out;
}

export interface RunOptions {
  seed: number;
  steps: number;
  params: SimParameters;
  /** The campaign config (defaults as parseCampaignConfig gives them); the policy sets its ablation. */
  config: CampaignConfig;
}

export interface RunResult {
  policy: string;
  seed: number;
  /** Mean task success over the held-out tasks before training and after the last step. */
  heldOutStart: number;
  heldOutEnd: number;
  /** Held-out success at step 0 and every evalEvery steps (and the last step). */
  heldOutCurve: { step: number; success: number }[];
  /** Mean task success over the human seeds (trained on) after the last step. */
  trainEnd: number;
  rollouts: number;
  groups: number;
  zeroVarianceGroups: number;
  zeroVarianceShare: number;
  /** Per step: share of the observed active pool in the boundary band after the step's plan. */
  boundaryShare: number[];
  /** Per step: share of the step's groups with zero variance. */
  zeroVariancePerStep: number[];
  selected: number;
  validated: number;
  injected: number;
  retired: number;
  finalPoolSize: number;
  /** Every task id that was trained on (for the held-out check). */
  trainedTaskIds: string[];
}

/** The config a policy runs under: the base config with the policy's ablation switches. */
export function policyConfig(
  base: CampaignConfig,
  ablation: Partial<Ablation>,
  seed: number,
): CampaignConfig {
  return { ...base, ablation: { ...base.ablation, randomSeed: seed, ...ablation } };
}

function heldOutSuccess(model: ReturnType<typeof newModel>, tasks: readonly ExperimentTask[]): number {
  return tasks.reduce((a, t) => a + taskSuccess(model, t), 0) / tasks.length;
}

/** One run of one policy on one seed's tasks. */
export function runPolicy(name: string, spec: PolicySpec, set: TaskSet, opts: RunOptions): RunResult {
  const { params: p, seed } = opts;
  const cfg = policyConfig(opts.config, spec.ablation, seed);
  const k = cfg.rolloutsPerTask;
  const tasks = new Map<string, ExperimentTask>(set.train.map((t) => [t.taskId, t]));
  const model = newModel();
  const states = new Map<string, TaskState>();
  const stats = new Map<string, TaskStats>();
  const trained = new Set<string>();
  let pool = applyDecisions(EMPTY_POOL, seedTasks(EMPTY_POOL, set.train, 0));
  const heldOutStart = heldOutSuccess(model, set.heldOut);
  const curve = [{ step: 0, success: heldOutStart }];
  const boundaryShare: number[] = [];
  const zeroPerStep: number[] = [];
  let groups = 0;
  let zero = 0;
  let rollouts = 0;
  let selected = 0;
  let validated = 0;
  let injected = 0;
  let retired = 0;
  let pending: SelectDecision[] = [];
  const flawedShare = cfg.ablation.rewrite === false ? p.flawedShareNoRewrite : p.flawedShare;

  for (let step = 1; step <= opts.steps; step++) {
    // 1–2. The trainer's batch, its groups and their statistics.
    const active = pool.members.map((m) => tasks.get(m.taskId)!);
    let zeroThisStep = 0;
    const batch = trainStep(model, active, p.batchTasks, k, p, {
      batch: `batch:${seed}:${step}`,
      rollouts: (taskId) => `rollouts:${seed}:${step}:${taskId}`,
    });
    for (const { task: t, rewards } of batch) {
      trained.add(t.taskId);
      groups++;
      rollouts += rewards.length;
      if (groupStd(rewards) === 0) zeroThisStep++;
      const applied = applyGroup(states.get(t.taskId), rewards, step, cfg.detector);
      states.set(t.taskId, applied.state);
      stats.set(t.taskId, statsRecord(applied.state));
    }
    zero += zeroThisStep;
    zeroPerStep.push(batch.length ? zeroThisStep / batch.length : 0);

    // 3. The previous step's synthesis runs: one candidate per selected seed.
    const candidates: StepCandidate[] = [];
    for (const s of spec.synthesis ? pending : []) {
      const parent = tasks.get(s.taskId)!;
      const taskId = candidateId(s.taskId, s.step);
      const draw = rng(hash32(`synthesis:${seed}:${taskId}`));
      if (draw() >= p.gatePass) continue;
      const flawed = draw() < flawedShare;
      if (cfg.ablation.judge !== false && draw() < (flawed ? p.judgeCatchesFlawed : p.judgeRejectsSound))
        continue;
      const shape = { category: parent.category, classes: parent.classes, turns: parent.turns };
      tasks.set(taskId, {
        taskId,
        ...shape,
        split: 'generated',
        difficulty: flawed
          ? FLAWED_DIFFICULTY
          : aimedDifficulty(model, shape, s.stats.latestGroupMean, p.generatorNoiseSd * normal(draw)),
      });
      validated++;
      candidates.push({
        candidateId: `cand-${taskId}`,
        taskId,
        category: s.category,
        parents: [s.taskId],
        parentPhi: s.phi,
        seedLineage: { rootSeedId: s.rootSeedId, depth: s.depth },
      });
    }

    // 4. The live pipeline's step decider under the policy's ablation.
    const plan = planStep({ pool, step, config: cfg, stats, candidates });
    pool = plan.state;
    retired += plan.retired.length;
    selected += plan.selected.length;
    injected += plan.injection.inject.length;
    pending = plan.selected;
    let observed = 0;
    let boundary = 0;
    for (const m of pool.members) {
      if (!m.lastStats) continue;
      observed++;
      if (m.lastStats.band === 'boundary') boundary++;
    }
    boundaryShare.push(observed ? boundary / observed : 0);
    if (step % p.evalEvery === 0 || step === opts.steps)
      curve.push({ step, success: heldOutSuccess(model, set.heldOut) });
  }

  return {
    policy: name,
    seed,
    heldOutStart,
    heldOutEnd: curve[curve.length - 1]!.success,
    heldOutCurve: curve,
    trainEnd: heldOutSuccess(model, set.train),
    rollouts,
    groups,
    zeroVarianceGroups: zero,
    zeroVarianceShare: groups ? zero / groups : 0,
    boundaryShare,
    zeroVariancePerStep: zeroPerStep,
    selected,
    validated,
    injected,
    retired,
    finalPoolSize: pool.members.length,
    trainedTaskIds: [...trained],
  };
}

export interface ExperimentOptions {
  policies?: readonly string[];
  /** Independent runs per policy: seeds firstSeed .. firstSeed + seeds − 1 (default 10). */
  seeds?: number;
  firstSeed?: number;
  steps?: number;
  /** Overrides of the parameters (the sweep's, and small runs in tests). */
  params?: Partial<SimParameters>;
  /** Base campaign config; its `ablation` is the `config` policy's. */
  config?: CampaignConfigInput;
  /** Called after each run (progress). */
  onRun?: (done: number, total: number) => void;
}

export interface PolicySummary {
  policy: string;
  what: string;
  /** The campaign config's ablation this policy ran under (randomSeed: the run's seed). */
  ablation: Partial<Ablation>;
  synthesis: boolean;
  runs: number;
  heldOutStart: Interval;
  heldOut: Interval;
  /** Paired difference from static on the same seeds (when static ran). */
  vsStatic: Interval | null;
  trainSuccess: Interval;
  /** Rollouts per run (the same for every policy and seed). */
  rollouts: number;
  zeroVarianceShare: Interval;
  /** Mean over runs, per step. */
  boundaryShare: number[];
  zeroVariancePerStep: number[];
  heldOutCurve: { step: number; success: number }[];
  selected: number;
  validated: number;
  injected: number;
  retired: number;
  finalPoolSize: number;
}

export interface ExperimentResult {
  seeds: number[];
  steps: number;
  params: SimParameters;
  k: number;
  policies: PolicySummary[];
}

/** The spec of a policy name; `config` is the base config's own ablation. */
export function policySpec(name: string, config: CampaignConfig): PolicySpec {
  if (name === CONFIG_POLICY) {
    // randomSeed follows the run's seed, like the other policies'.
    const { randomSeed: _, ...ablation } = config.ablation;
    return {
      ablation,
      synthesis: true,
      what: 'the ablation of the given campaign config',
    };
  }
  const s = POLICY_SPECS[name];
  if (!s) throw new Error(`unknown policy ${JSON.stringify(name)}`);
  return s;
}

const avg = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
const avgSeries = (xs: readonly (readonly number[])[]) => xs[0]!.map((_, i) => avg(xs.map((s) => s[i]!)));

/** Every policy on every seed; each seed's tasks are shared by all policies. */
export function runExperiment(opts: ExperimentOptions = {}): ExperimentResult {
  const params: SimParameters = { ...PARAMETERS, ...opts.params };
  const steps = opts.steps ?? params.steps;
  const nSeeds = opts.seeds ?? 10;
  const first = opts.firstSeed ?? 1;
  const seeds = Array.from({ length: nSeeds }, (_, i) => first + i);
  const config = parseCampaignConfig(opts.config ?? {});
  const names = opts.policies ?? DEFAULT_POLICIES;
  const specs = names.map((n) => policySpec(n, config));
  const runs = new Map<string, RunResult[]>(names.map((n) => [n, []]));
  let done = 0;
  for (const seed of seeds) {
    const set = makeTasks(seed, params);
    names.forEach((n, i) => {
      runs.get(n)!.push(runPolicy(n, specs[i]!, set, { seed, steps, params, config }));
      opts.onRun?.(++done, names.length * seeds.length);
    });
  }
  const budgets = new Set([...runs.values()].flat().map((r) => r.rollouts));
  if (budgets.size !== 1)
    throw new Error(`policies used different rollout budgets: ${[...budgets].join(', ')}`);
  const staticRuns = runs.get('static');
  return {
    seeds,
    steps,
    params,
    k: config.rolloutsPerTask,
    policies: names.map((n, i) => {
      const rs = runs.get(n)!;
      const spec = specs[i]!;
      return {
        policy: n,
        what: spec.what,
        ablation: spec.ablation,
        synthesis: spec.synthesis,
        runs: rs.length,
        heldOutStart: ci95(rs.map((r) => r.heldOutStart)),
        heldOut: ci95(rs.map((r) => r.heldOutEnd)),
        vsStatic:
          staticRuns && n !== 'static'
            ? pairedCi95(
                rs.map((r) => r.heldOutEnd),
                staticRuns.map((r) => r.heldOutEnd),
              )
            : null,
        trainSuccess: ci95(rs.map((r) => r.trainEnd)),
        rollouts: rs[0]!.rollouts,
        zeroVarianceShare: ci95(rs.map((r) => r.zeroVarianceShare)),
        boundaryShare: avgSeries(rs.map((r) => r.boundaryShare)),
        zeroVariancePerStep: avgSeries(rs.map((r) => r.zeroVariancePerStep)),
        heldOutCurve: rs[0]!.heldOutCurve.map((c, j) => ({
          step: c.step,
          success: avg(rs.map((r) => r.heldOutCurve[j]!.success)),
        })),
        selected: avg(rs.map((r) => r.selected)),
        validated: avg(rs.map((r) => r.validated)),
        injected: avg(rs.map((r) => r.injected)),
        retired: avg(rs.map((r) => r.retired)),
        finalPoolSize: avg(rs.map((r) => r.finalPoolSize)),
      };
    }),
  };
}

/** One point of the sensitivity sweep: a parameter set away from its default. */
export interface SweepPoint {
  parameter: string;
  value: number;
  params: Partial<SimParameters>;
}

/**
 * The sweep: three key parameters, each at a lower and a higher value than the default, the
 * others at theirs. Transfer scales the class and the structure transfer together.
 */
export function sweepPoints(p: SimParameters = PARAMETERS): SweepPoint[] {
  return [
    ...[0.5, 2].map((f) => ({
      parameter: 'transfer (x default)',
      value: f,
      params: { classTransfer: p.classTransfer * f, structureTransfer: p.structureTransfer * f },
    })),
    ...[1, 3].map((v) => ({ parameter: 'difficultyMean', value: v, params: { difficultyMean: v } })),
    ...[0.25, 1.5].map((v) => ({ parameter: 'generatorNoiseSd', value: v, params: { generatorNoiseSd: v } })),
  ];
}

export interface SweepResult {
  point: SweepPoint;
  result: ExperimentResult;
}

export function runSweep(
  opts: Omit<ExperimentOptions, 'onRun'> & { onRun?: (done: number, total: number) => void },
): SweepResult[] {
  const points = sweepPoints({ ...PARAMETERS, ...opts.params });
  const perPoint = (opts.policies ?? DEFAULT_POLICIES).length * (opts.seeds ?? 10);
  return points.map((point, i) => ({
    point,
    result: runExperiment({
      ...opts,
      params: { ...opts.params, ...point.params },
      onRun: (d) => opts.onRun?.(i * perPoint + d, points.length * perPoint),
    }),
  }));
}
