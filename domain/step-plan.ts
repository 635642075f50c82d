// One training step of the curriculum, decided in one place: the live planner
// (activities/curriculum.ts), what-if replay (analysis/replay/whatif.ts), the simulated experiment
// (dev/simulator/experiment.ts) and the sandbox scenario all call planStep, so they take the same
// decisions in the same order. Pure and deterministic, like the policy it sequences
// (pool/policy.ts); it runs in the workflow sandbox too.
//
// The order, each part folded into the pool before the next is decided:
//   1. observe: members whose statistics have new reward groups record them;
//   2. enqueue: validated candidates not yet queued or in the pool join the injection queue;
//   3. retire: by rule (mastered, burn-in);
//   4. select: boundary seeds for synthesis;
//   5. at an injection boundary: discard duplicates, prune, inject (planDecisions' order).
import type { TaskStats } from '../schemas/types.generated.js';
import { type CampaignConfig, isInjectionBoundary } from './campaign-config.js';
import { type Lineage, LineageError } from './lineage.js';
import type {
  EnqueueDecision,
  ObserveDecision,
  PoolDecision,
  RetireDecision,
  SelectDecision,
} from './pool/decisions.js';
import { applyDecisions } from './pool/evolve.js';
import type { RejectionStreak } from './pool/policy.js';
import {
  type InjectionPlan,
  planDecisions,
  planInjection,
  queueCandidate,
  randomRanking,
  retire,
  type SelectOptions,
  selectSeeds,
} from './pool/policy.js';
import { lookUp, type PoolState, type TaskLookup } from './pool/state.js';
import type { TaskRecord } from './task.js';

/** A validated candidate offered to the queue at this step. */
export interface StepCandidate {
  candidateId: string;
  /** Id the task gets when injected. */
  taskId: string;
  category: string;
  /** Lineage parents, seed first. */
  parents: string[];
  /** φ of the seed when it was selected. */
  parentPhi: number;
  /** Lineage of the first parent (the seed) for when it is no longer a pool member. */
  seedLineage?: Lineage;
}

export interface StepInput {
  /** The pool after the previous step's plan. */
  pool: PoolState;
  step: number;
  config: Pick<CampaignConfig, 'detector' | 'selection' | 'pool'> & Partial<Pick<CampaignConfig, 'ablation'>>;
  /**
   * The latest statistics by task id (tasks outside the pool may be present). Without them the
   * rules read each member's last observed statistics.
   */
  stats?: TaskLookup<TaskStats>;
  /** Candidates to queue, in queueing order. */
  candidates?: readonly StepCandidate[];
  /** Synthesis runs in flight and the seed ranking (see selectSeeds). */
  selection?: SelectOptions;
}

export interface StepDecisions {
  observed: ObserveDecision[];
  enqueued: EnqueueDecision[];
  /** Candidates left out of the queue because their seed's lineage is unknown (they stay validated). */
  unqueued: { candidateId: string; reason: string }[];
  retired: RetireDecision[];
  selected: SelectDecision[];
  /** Boundary seeds passed over for their rejected children (selection.rejectionBackoff). */
  passedOver: { taskId: string; reason: string }[];
  injection: InjectionPlan;
  /** Every decision in the order it was folded (and is appended as an event). */
  decisions: PoolDecision[];
  /** The pool after the step. */
  state: PoolState;
}

/** φ by task id for pruning, from the statistics (every task the lookup holds). */
function phiOfStats(stats: TaskLookup<TaskStats>): Record<string, number> {
  const entries =
    typeof (stats as ReadonlyMap<string, TaskStats>).entries === 'function' &&
    typeof (stats as ReadonlyMap<string, TaskStats>).get === 'function'
      ? [...(stats as ReadonlyMap<string, TaskStats>).entries()]
      : Object.entries(stats as Readonly<Record<string, TaskStats>>);
  const phiByTask: Record<string, number> = {};
  for (const [id, s] of entries) phiByTask[id] = s.phi;
  return phiByTask;
}

/** The decisions of one training step and the pool they lead to (see the top of the file). */
/**
 * The static pool's one selection (ablation.pool static, the paper's static-pool ablation): at the
 * first injection boundary, every eligible boundary seed of the listed categories at once, as many
 * as the pool's generated tasks may be (pool.generatedCap), instead of one step's budget. Their
 * candidates are injected as they come, at the next injection boundaries; nothing is selected or
 * retired after, so once they are in the pool no longer changes.
 */
function initialWave<C extends Pick<CampaignConfig, 'selection' | 'pool'>>(cfg: C): C {
  const wave = cfg.pool.generatedCap;
  return {
    ...cfg,
    selection: {
      ...cfg.selection,
      budgetPerStep: wave,
      maxConcurrentSyntheses: wave,
      perCategoryQuota: Object.fromEntries(Object.keys(cfg.selection.perCategoryQuota).map((k) => [k, wave])),
    },
  };
}

export function planStep(input: StepInput): StepDecisions {
  const { step, config: cfg, stats } = input;
  let state = input.pool;

  // Statistics seen since the last plan (not membership changes).
  const observed: ObserveDecision[] = [];
  for (const m of state.members) {
    const s = lookUp(stats, m.taskId);
    if (s && (!m.lastStats || m.lastStats.groupCount !== s.groupCount))
      observed.push({
        kind: 'observe',
        taskId: m.taskId,
        stats: s,
        // A generated task's first group in the boundary band, soon enough after its injection.
        ...(m.origin === 'generated' &&
        m.firstBoundaryStep === undefined &&
        s.band === 'boundary' &&
        s.lastStep - m.injectedAtStep <= cfg.pool.usefulWithinSteps
          ? { useful: true as const }
          : {}),
      });
  }
  state = applyDecisions(state, observed);

  const known = new Set([
    ...state.queue.map((q) => q.candidateId),
    ...state.members.flatMap((m) => (m.candidateId ? [m.candidateId] : [])),
  ]);
  const enqueued: EnqueueDecision[] = [];
  const unqueued: { candidateId: string; reason: string }[] = [];
  for (const c of input.candidates ?? []) {
    if (known.has(c.candidateId)) continue;
    const first = c.parents[0];
    try {
      enqueued.push(
        queueCandidate(
          state,
          {
            candidateId: c.candidateId,
            taskId: c.taskId,
            category: c.category,
            parents: c.parents,
            parentPhi: c.parentPhi,
          },
          step,
          (id) => (id === first ? c.seedLineage : undefined),
        ),
      );
    } catch (e) {
      if (!(e instanceof LineageError)) throw e;
      unqueued.push({ candidateId: c.candidateId, reason: e.message });
    }
  }
  state = applyDecisions(state, enqueued);

  // Ablations (config.ablation): no retirement by rule; random seed selection; a static pool.
  const frozen = cfg.ablation?.pool === 'static';
  const retired = cfg.ablation?.retirement === false || frozen ? [] : retire(state, stats, step, cfg);
  state = applyDecisions(state, retired);

  const ranking =
    input.selection?.ranking ??
    (cfg.ablation?.selection === 'random' ? randomRanking(cfg.ablation.randomSeed) : undefined);
  const passedOver: { taskId: string; reason: string }[] = [];
  // The static pool selects its one wave at the first injection boundary (the initial boundary is
  // the pool's bands after its first trainer epoch), and nothing after.
  const selected = !frozen
    ? selectSeeds(state, stats, step, cfg, { ...input.selection, ranking, passedOver })
    : !isInjectionBoundary(step, cfg) || state.members.some((m) => m.lastSelectedStep !== undefined)
      ? []
      : selectSeeds(state, stats, step, initialWave(cfg), { ...input.selection, ranking, passedOver });
  state = applyDecisions(state, selected);

  const injection = planInjection(state, step, cfg, stats ? phiOfStats(stats) : undefined);
  const injectionDecisions = planDecisions(injection);
  state = applyDecisions(state, injectionDecisions);

  return {
    observed,
    enqueued,
    unqueued,
    retired,
    selected,
    passedOver,
    injection,
    decisions: [...observed, ...enqueued, ...retired, ...selected, ...injectionDecisions],
    state,
  };
}

// What planning a step records and returns to the campaign workflow: the decisions in the
// workflow's terms (ids, counts) and the selected seeds the syntheses start from.
export interface SelectedSeed {
  taskId: string;
  category: string;
  phi: number;
  quotaSlot: number;
  stats: TaskStats;
  rootSeedId: string;
  depth: number;
  selectionEventId: string;
  /** Policy version of the latest reward group of the seed (lineage). */
  policyVersion: string | null;
  task: TaskRecord;
}

export interface StepPlan {
  step: number;
  poolVersion: number;
  versionChanged: boolean;
  boundary: boolean;
  retired: { taskId: string; rule: string }[];
  selected: SelectedSeed[];
  injected: string[];
  pruned: string[];
  queueLength: number;
  activeSize: number;
  generated: number;
  /** Generated tasks, ever, seen in the boundary band within pool.usefulWithinSteps of their injection. */
  useful?: number;
  /** What the decisions depended on besides the statistics (for what-if re-runs). */
  inputs: {
    inFlight: string[];
    runningSyntheses: number;
    enqueued: string[];
    /** Seeds whose latest children were all rejected (selection.rejectionBackoff). */
    rejectionStreaks?: Record<string, RejectionStreak>;
  };
  /** Boundary seeds passed over for their rejected children, with the reason. */
  passedOver?: { taskId: string; reason: string }[];
}
