// Random training histories for the checkpoint manifests' property tests: a trainer whose runs
// train steps, see some step reports refused, save checkpoints, get killed and resume from any
// saved checkpoint (or from scratch), while the gateway is sometimes away (checkpoints wait in the
// reporter's spool) and the campaign passes over missing steps (ingestion.missingSteps move-on).
//
// The trainer side follows the reporter's rules (clients/python/rods_client/reporting.py): the
// spool's `acked` is shared by every run on it; a step at or below it is not sent again but kept as
// trained again (a retrained record) for the run's next checkpoint of a step at or after it; a
// dead run's unclaimed records are dropped; checkpoints are sent in the order saved, each once every
// step up to it is closed, and never hold the step reports behind them.
//
// `script(actions)` turns generated actions into what the campaign sees, with what each checkpoint
// was really trained on (`truth`). `ModelCampaign` is the campaign's side as the domain core
// decides it (domain/manifest.ts), for the pure test; the int test plays the same script on the
// real gateway and store.
import fc from 'fast-check';
import {
  type CheckpointRecord,
  type ManifestSummary,
  ReportedTotals,
  recordedUpTo,
  retrainedInChain,
  type StepTask,
  type TaskIdentity,
  trainingChain,
} from '../../../domain/manifest.js';

export const MODEL_TASKS = ['t0', 't1', 't2', 't3', 't4', 't5'] as const;
/** ingestion.missingSteps.afterSteps of the campaigns the scripts run on. */
export const AFTER_STEPS = 2;

export type Action =
  | { kind: 'train'; tasks: number; rollouts: number; refused: boolean }
  | { kind: 'save' }
  /**
   * A report no reporter sends but a hand-written client may: a checkpoint of the run at an earlier
   * step, naming steps of its run's part as trained again on other tasks. Its truth is unknown.
   */
  | { kind: 'odd-save'; back: number; steps: number; tasks: number }
  | { kind: 'kill'; resumeFrom: number | null }
  | { kind: 'deliver' }
  | { kind: 'tick' };

/** The actions of one history (a bitmask picks each step's tasks). */
export const actionsArb: fc.Arbitrary<Action[]> = fc.array(
  fc.oneof(
    {
      weight: 6,
      arbitrary: fc.record({
        kind: fc.constant('train' as const),
        tasks: fc.integer({ min: 1, max: 2 ** MODEL_TASKS.length - 1 }),
        rollouts: fc.integer({ min: 1, max: 8 }),
        // One report in ten refused (a reward out of range, say).
        refused: fc.nat({ max: 9 }).map((n) => n === 0),
      }),
    },
    { weight: 2, arbitrary: fc.constant({ kind: 'save' as const }) },
    {
      weight: 1,
      arbitrary: fc.record({
        kind: fc.constant('odd-save' as const),
        back: fc.nat({ max: 4 }),
        steps: fc.nat({ max: 2 ** 6 - 1 }),
        tasks: fc.integer({ min: 1, max: 2 ** MODEL_TASKS.length - 1 }),
      }),
    },
    {
      weight: 1,
      arbitrary: fc.record({
        kind: fc.constant('kill' as const),
        resumeFrom: fc.option(fc.nat({ max: 1000 }), { nil: null }),
      }),
    },
    { weight: 2, arbitrary: fc.constant({ kind: 'deliver' as const }) },
    { weight: 1, arbitrary: fc.constant({ kind: 'tick' as const }) },
  ),
  { minLength: 1, maxLength: 60 },
);

/** What a checkpoint's weights were trained on: task -> its steps, groups and rollouts (refused reports left out). */
export type Truth = Map<string, { steps: number[]; groups: number; rollouts: number }>;

export type ScriptEvent =
  | { kind: 'report'; step: number; tasks: StepTask[] }
  | { kind: 'refuse'; step: number; tasks: StepTask[] }
  | { kind: 'checkpoint'; record: CheckpointRecord; truth: Truth | null }
  | { kind: 'deliver' }
  | { kind: 'tick' };

interface TrainedStep {
  step: number;
  tasks: StepTask[];
  /** Left out of the truth: this run's own report of it was refused (the campaign passes over it). */
  refused: boolean;
}

interface Run {
  runId: string;
  parent: { checkpointId: string; step: number; history: TrainedStep[]; runs: string[] } | null;
  at: number;
  history: TrainedStep[];
  /** Retrained records not claimed yet: step -> tasks. */
  retrained: Map<number, StepTask[]>;
  saves: number;
  /** The runs of its chain, its own last. */
  runs: string[];
}

const truthOf = (history: readonly TrainedStep[]): Truth => {
  const t: Truth = new Map();
  for (const s of history) {
    if (s.refused) continue;
    for (const x of s.tasks) {
      const e = t.get(x.taskId) ?? { steps: [], groups: 0, rollouts: 0 };
      e.steps.push(s.step);
      e.groups += x.groups;
      e.rollouts += x.rollouts;
      t.set(x.taskId, e);
    }
  }
  return t;
};

/** The campaign's view of a history: reports, refusals, saved checkpoints, deliveries and policy ticks. */
export function script(actions: readonly Action[]): ScriptEvent[] {
  const out: ScriptEvent[] = [];
  const saved: NonNullable<Run['parent']>[] = [];
  let acked = 0;
  let runs = 0;
  // Runs that made an odd save: every checkpoint recorded after it whose chain holds such a run reads its steps.
  const odd = new Set<string>();
  const newRun = (parent: Run['parent']): Run => ({
    runId: `r${++runs}`,
    parent,
    at: parent?.step ?? 0,
    history: parent ? [...parent.history] : [],
    retrained: new Map(),
    saves: 0,
    runs: [...(parent?.runs ?? []), `r${runs}`],
  });
  let run = newRun(null);
  for (const a of actions) {
    if (a.kind === 'train') {
      const step = run.at + 1;
      const tasks = MODEL_TASKS.filter((_, i) => a.tasks & (1 << i)).map(
        (taskId): StepTask => ({ taskId, groups: 1, rollouts: a.rollouts }),
      );
      run.at = step;
      if (step <= acked) {
        // Reported before (by an earlier run, or refused): trained again.
        run.retrained.set(step, tasks);
        run.history.push({ step, tasks, refused: false });
      } else {
        acked = step;
        out.push({ kind: a.refused ? 'refuse' : 'report', step, tasks });
        run.history.push({ step, tasks, refused: a.refused });
      }
    } else if (a.kind === 'save') {
      if (run.at < 1) continue;
      const checkpointId = `${run.runId}-c${++run.saves}`;
      const claimed = [...run.retrained].filter(([s]) => s <= run.at).sort((x, y) => x[0] - y[0]);
      for (const [s] of claimed) run.retrained.delete(s);
      out.push({
        kind: 'checkpoint',
        record: {
          checkpointId,
          runId: run.runId,
          trainerStep: run.at,
          resumedFrom: run.parent?.checkpointId ?? null,
          retrainedSteps: claimed.map(([step, tasks]) => ({ step, tasks })),
        },
        truth: run.runs.some((r) => odd.has(r)) ? null : truthOf(run.history),
      });
      saved.push({ checkpointId, step: run.at, history: [...run.history], runs: run.runs });
    } else if (a.kind === 'odd-save') {
      const from = run.parent?.step ?? 0;
      const step = Math.max(from, run.at - a.back);
      if (step < 1) continue;
      const tasks = MODEL_TASKS.filter((_, i) => a.tasks & (1 << i)).map(
        (taskId): StepTask => ({ taskId, groups: 1, rollouts: 3 }),
      );
      const steps = Array.from({ length: 6 }, (_, i) => step - i).filter(
        (s, i) => s > from && a.steps & (1 << i),
      );
      out.push({
        kind: 'checkpoint',
        record: {
          checkpointId: `${run.runId}-c${++run.saves}`,
          runId: run.runId,
          trainerStep: step,
          resumedFrom: run.parent?.checkpointId ?? null,
          retrainedSteps: steps.sort((x, y) => x - y).map((s) => ({ step: s, tasks })),
        },
        truth: null,
      });
      odd.add(run.runId);
    } else if (a.kind === 'kill') {
      const from = a.resumeFrom === null || saved.length === 0 ? null : saved[a.resumeFrom % saved.length]!;
      run = newRun(from);
    } else out.push({ kind: a.kind });
  }
  return out;
}

/** What the campaign answers a checkpoint: recorded (with its summary), waiting, or refused. */
export type CheckpointOutcome = 'recorded' | 'waits' | 'refused';

/**
 * The campaign side of a script as the gateway decides it: steps close when reported; a tick (the
 * campaign's missing-step policy, move-on) passes over a refused step, and over a step never
 * reported once AFTER_STEPS later steps closed; a checkpoint is recorded (in the order saved) once
 * every step up to it is closed.
 */
export class ModelCampaign {
  readonly record = new Map<number, StepTask[]>();
  readonly closed = new Set<number>();
  readonly refused = new Set<number>();
  readonly recorded: CheckpointRecord[] = [];
  readonly queue: { record: CheckpointRecord; truth: Truth | null }[] = [];
  readonly truths = new Map<string, Truth | null>();

  closedThrough(step: number): boolean {
    for (let s = 1; s <= step; s++) if (!this.closed.has(s)) return false;
    return true;
  }

  /** Steps the missing-step policy passes over now: refused ones, and gaps below AFTER_STEPS closed steps. */
  missing(): number[] {
    const closed = [...this.closed];
    const out: number[] = [];
    const top = Math.max(0, ...closed, ...this.refused);
    for (let s = 1; s <= top; s++)
      if (!this.closed.has(s) && (this.refused.has(s) || closed.filter((c) => c > s).length >= AFTER_STEPS))
        out.push(s);
    return out;
  }

  apply(e: ScriptEvent, deliver: (c: CheckpointRecord) => CheckpointOutcome = () => 'recorded'): void {
    if (e.kind === 'report') {
      this.record.set(e.step, e.tasks);
      this.closed.add(e.step);
    } else if (e.kind === 'refuse') {
      this.refused.add(e.step);
    } else if (e.kind === 'checkpoint') {
      this.queue.push({ record: e.record, truth: e.truth });
      this.truths.set(e.record.checkpointId, e.truth);
    } else if (e.kind === 'tick') {
      for (const s of this.missing()) this.closed.add(s);
    } else if (e.kind === 'deliver') {
      // The head of the spool's checkpoints, while each can be recorded.
      while (this.queue.length > 0 && this.closedThrough(this.queue[0]!.record.trainerStep)) {
        const head = this.queue.shift()!;
        if (deliver(head.record) === 'recorded') this.recorded.push(head.record);
      }
    }
  }
}

/**
 * The summary of each target as `rods audit verify` computes it, without a database: one pass over
 * the campaign's record in step order (ReportedTotals), each target reading the checkpoints
 * recorded up to it (`recorded` in record order), its chain's retrained steps swapped in.
 */
export function summariesInOnePass(
  targets: readonly CheckpointRecord[],
  recorded: readonly CheckpointRecord[],
  record: (step: number) => StepTask[] | undefined,
  identity: (taskId: string) => TaskIdentity | undefined,
): Map<string, ManifestSummary> {
  const swaps = new Map(
    targets.map((x) => {
      const upTo = recordedUpTo(recorded, x);
      return [
        x.checkpointId,
        retrainedInChain(trainingChain(x, new Map(upTo.map((c) => [c.checkpointId, c]))), upTo),
      ];
    }),
  );
  const totals = new ReportedTotals();
  const out = new Map<string, ManifestSummary>();
  const byStep = [...targets].sort((a, b) => a.trainerStep - b.trainerStep);
  const last = Math.max(0, ...targets.map((x) => x.trainerStep));
  let next = 0;
  for (let step = 1; step <= last + 1; step++) {
    while (next < byStep.length && byStep[next]!.trainerStep < step) {
      const x = byStep[next++]!;
      const swapped = new Map(
        [...swaps.get(x.checkpointId)!].map(([s, trained]) => [s, { reported: record(s) ?? [], trained }]),
      );
      out.set(x.checkpointId, totals.summary(x.checkpointId, swapped, identity));
    }
    const tasks = record(step);
    if (tasks && tasks.length > 0) totals.add(step, tasks);
  }
  return out;
}
