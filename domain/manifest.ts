// What a checkpoint was trained on. A checkpoint holds every optimizer step up to its trainer
// step along its chain of runs: a run started from scratch trained steps 1..s; a run resumed from
// a checkpoint P holds P's training up to P's step and its own after it. The steps of a resumed
// run that an earlier run had reported are trained again (the earlier training left with the
// discarded weights); the campaign's statistics keep the first report, so the resumed run's
// adapter sends what it trained at them with its next checkpoint (retrained steps). The manifest
// lists every task of those steps with its content hash, its lineage root and the steps and
// groups it was rewarded in; its Merkle root (domain/merkle.ts) is recorded with the checkpoint
// and recomputed by `rods audit verify`.
import { canonicalJson, sha256Hex } from './canonical-json.js';
import { leafHash, merkleRoot, merkleRootOfLeaves } from './merkle.js';

export class ManifestError extends Error {
  override name = 'ManifestError';
}

/** A task trained at one step: its reward groups and rollouts there. */
export interface StepTask {
  taskId: string;
  groups: number;
  rollouts: number;
}

export interface RetrainedStep {
  step: number;
  tasks: StepTask[];
}

/** A recorded checkpoint, as the manifest needs it. */
export interface CheckpointRecord {
  checkpointId: string;
  runId: string;
  trainerStep: number;
  resumedFrom: string | null;
  retrainedSteps: RetrainedStep[];
}

/** One run's part of a checkpoint's training: steps (from, to] trained by run `runId`. */
export interface TrainingSegment {
  runId: string;
  /** The checkpoint that ends the segment. */
  checkpointId: string;
  from: number;
  to: number;
}

/** One step of a checkpoint's training: which run trained it and on what. */
export interface TrainedStep {
  step: number;
  runId: string;
  /** `reported`: the campaign's statistics of the step; `retrained`: the run's own report of a step trained again. */
  source: 'reported' | 'retrained';
  tasks: StepTask[];
}

/** What the manifest says of a task beyond its training: its identity. */
export interface TaskIdentity {
  contentHash: string;
  lineageRoot: string;
}

export interface ManifestEntry extends TaskIdentity {
  taskId: string;
  /** Steps the task was trained at, ascending. */
  steps: number[];
  groups: number;
  rollouts: number;
}

export interface Manifest {
  checkpointId: string;
  trainerStep: number;
  chain: TrainingSegment[];
  steps: TrainedStep[];
  /** In task id order: the Merkle tree's leaves. */
  entries: ManifestEntry[];
  root: string;
  groups: number;
}

/** The runs behind a checkpoint, oldest first; fails on an unknown parent, a cycle or a parent ahead of its child. */
export function trainingChain(
  target: CheckpointRecord,
  byId: ReadonlyMap<string, CheckpointRecord>,
): TrainingSegment[] {
  const chain: TrainingSegment[] = [];
  const seen = new Set<string>();
  let current: CheckpointRecord | undefined = target;
  while (current) {
    if (seen.has(current.checkpointId))
      throw new ManifestError(`checkpoint ${current.checkpointId} resumes from itself through its parents`);
    seen.add(current.checkpointId);
    const parentId: string | null = current.resumedFrom;
    const parent: CheckpointRecord | undefined = parentId === null ? undefined : byId.get(parentId);
    if (parentId !== null && !parent)
      throw new ManifestError(
        `checkpoint ${current.checkpointId} resumed from ${parentId}, which the campaign has not recorded`,
      );
    const from = parent?.trainerStep ?? 0;
    if (from > current.trainerStep)
      throw new ManifestError(
        `checkpoint ${current.checkpointId} (step ${current.trainerStep}) resumed from ${parentId} at a later step ${from}`,
      );
    chain.unshift({
      runId: current.runId,
      checkpointId: current.checkpointId,
      from,
      to: current.trainerStep,
    });
    current = parent;
  }
  return chain;
}

/**
 * The checkpoints a manifest of `target` reads: those recorded before it (`recorded` is in record
 * order) and itself. A checkpoint recorded later never changes an earlier one's manifest: a run's
 * later report of a step it trained again counts for its later checkpoints only.
 */
export function recordedUpTo(
  recorded: readonly CheckpointRecord[],
  target: CheckpointRecord,
): CheckpointRecord[] {
  const at = recorded.findIndex((c) => c.checkpointId === target.checkpointId);
  return at < 0 ? [...recorded, target] : recorded.slice(0, at + 1);
}

/** What identifies a checkpoint report: the same report again is a duplicate, anything else a conflict. */
export interface CheckpointReportKey extends CheckpointRecord {
  digest: string | null;
}

/** The report's canonical form (retrained tasks as [taskId, rollouts]; groups are one each). */
function reportForm(r: CheckpointReportKey) {
  return {
    runId: r.runId,
    trainerStep: r.trainerStep,
    resumedFrom: r.resumedFrom,
    digest: r.digest,
    retrainedSteps: r.retrainedSteps.map((s) => ({
      step: s.step,
      tasks: s.tasks.map((t) => [t.taskId, t.rollouts]),
    })),
  };
}

/** SHA-256 of a report's canonical form: what the checkpoint route compares a repeated id by. */
export const reportHash = (r: CheckpointReportKey): string => sha256Hex(canonicalJson(reportForm(r)));

/** The first field two reports of one checkpoint id differ in, for a 409 (null: the same report). */
export function reportDifference(recorded: CheckpointReportKey, sent: CheckpointReportKey): string | null {
  const a = reportForm(recorded);
  const b = reportForm(sent);
  for (const k of ['runId', 'trainerStep', 'resumedFrom', 'digest'] as const)
    if (a[k] !== b[k])
      return `${k === 'trainerStep' ? 'step' : k} ${JSON.stringify(b[k])} (recorded: ${JSON.stringify(a[k])})`;
  const ra = canonicalJson(a.retrainedSteps);
  const rb = canonicalJson(b.retrainedSteps);
  if (ra === rb) return null;
  const steps = (x: typeof a) => x.retrainedSteps.map((s) => s.step).join(',') || 'none';
  return steps(a) === steps(b)
    ? `retrainedSteps: the tasks or rollouts of steps ${steps(b)} differ`
    : `retrainedSteps: steps ${steps(b)} (recorded: ${steps(a)})`;
}

/** The steps a run trained again up to `upTo`, from every checkpoint of the run (each step once). */
export function retrainedByRun(
  checkpoints: Iterable<CheckpointRecord>,
  runId: string,
  upTo: number,
): Map<number, StepTask[]> {
  const out = new Map<number, StepTask[]>();
  for (const c of checkpoints) {
    if (c.runId !== runId || c.trainerStep > upTo) continue;
    for (const r of c.retrainedSteps) if (r.step <= upTo && !out.has(r.step)) out.set(r.step, r.tasks);
  }
  return out;
}

/** Every step of the chain with the run that trained it; `reported(step)` gives the campaign's record of a step. */
export function trainedSteps(
  chain: readonly TrainingSegment[],
  checkpoints: Iterable<CheckpointRecord>,
  reported: (step: number) => StepTask[] | undefined,
): TrainedStep[] {
  const all = [...checkpoints];
  const out: TrainedStep[] = [];
  for (const seg of chain) {
    const retrained = retrainedByRun(all, seg.runId, seg.to);
    for (let step = seg.from + 1; step <= seg.to; step++) {
      const again = retrained.get(step);
      if (again) out.push({ step, runId: seg.runId, source: 'retrained', tasks: again });
      else {
        const tasks = reported(step);
        // A step without a record trained nothing rods saw (a closed empty step, or a skipped one).
        if (tasks && tasks.length > 0) out.push({ step, runId: seg.runId, source: 'reported', tasks });
      }
    }
  }
  return out;
}

/** The task ids of the steps, for looking their identities up. */
export function stepTaskIds(steps: readonly TrainedStep[]): string[] {
  const ids = new Set<string>();
  for (const s of steps) for (const t of s.tasks) ids.add(t.taskId);
  return [...ids].sort();
}

/** The manifest's leaf record of an entry: what the Merkle root commits to. */
export const manifestLeaf = (e: ManifestEntry) => ({
  taskId: e.taskId,
  contentHash: e.contentHash,
  lineageRoot: e.lineageRoot,
  steps: e.steps,
  groups: e.groups,
  rollouts: e.rollouts,
});

/** The manifest of a checkpoint from its chain, trained steps and the identities of their tasks. */
export function buildManifest(
  target: CheckpointRecord,
  chain: TrainingSegment[],
  steps: TrainedStep[],
  identity: (taskId: string) => TaskIdentity | undefined,
): Manifest {
  const byTask = new Map<string, ManifestEntry>();
  let groups = 0;
  for (const s of steps) {
    for (const t of s.tasks) {
      let e = byTask.get(t.taskId);
      if (!e) {
        const id = identity(t.taskId);
        if (!id)
          throw new ManifestError(
            `task ${t.taskId}, trained at step ${s.step}, has no seeding or injection in the campaign's log`,
          );
        e = { taskId: t.taskId, ...id, steps: [], groups: 0, rollouts: 0 };
        byTask.set(t.taskId, e);
      }
      if (e.steps.at(-1) !== s.step) e.steps.push(s.step);
      e.groups += t.groups;
      e.rollouts += t.rollouts;
      groups += t.groups;
    }
  }
  const entries = [...byTask.values()].sort((a, b) =>
    a.taskId < b.taskId ? -1 : a.taskId > b.taskId ? 1 : 0,
  );
  return {
    checkpointId: target.checkpointId,
    trainerStep: target.trainerStep,
    chain,
    steps,
    entries,
    root: merkleRoot(entries.map(manifestLeaf)),
    groups,
  };
}

// ---------------------------------------------------------------------------------------------
// Diff

export type StepDiffStatus =
  /** Trained in one checkpoint's history only. */
  | 'only-a'
  | 'only-b'
  /** The same run's training of the step in both. */
  | 'same'
  /** Trained by different runs of one campaign: one checkpoint holds an earlier run's training, the other a resumed run's replay. */
  | 'replayed'
  /** Different campaigns (or runs) on the same tasks and rollouts. */
  | 'same-tasks'
  /** Different campaigns on different tasks. */
  | 'differs';

export interface StepDiff {
  step: number;
  status: StepDiffStatus;
  a?: { runId: string; source: TrainedStep['source']; tasks: number };
  b?: { runId: string; source: TrainedStep['source']; tasks: number };
  /** Tasks (with rollouts) one side trained at the step and the other did not, or with other rollouts. */
  onlyA: string[];
  onlyB: string[];
}

export interface ManifestDiff {
  a: { checkpointId: string; trainerStep: number; root: string; tasks: number };
  b: { checkpointId: string; trainerStep: number; root: string; tasks: number };
  sameRoot: boolean;
  /** Every step that is not `same`, ascending. */
  steps: StepDiff[];
  counts: Record<StepDiffStatus, number>;
  /** Tasks in one manifest only. */
  tasksOnlyA: string[];
  tasksOnlyB: string[];
}

const taskKey = (t: StepTask) => `${t.taskId}\u001f${t.groups}\u001f${t.rollouts}`;

/** Compares two manifests step by step; `sameCampaign` tells a replay from a different campaign. */
export function diffManifests(a: Manifest, b: Manifest, sameCampaign: boolean): ManifestDiff {
  const stepsA = new Map(a.steps.map((s) => [s.step, s]));
  const stepsB = new Map(b.steps.map((s) => [s.step, s]));
  const all = [...new Set([...stepsA.keys(), ...stepsB.keys()])].sort((x, y) => x - y);
  const counts: Record<StepDiffStatus, number> = {
    'only-a': 0,
    'only-b': 0,
    same: 0,
    replayed: 0,
    'same-tasks': 0,
    differs: 0,
  };
  const steps: StepDiff[] = [];
  const side = (s: TrainedStep) => ({ runId: s.runId, source: s.source, tasks: s.tasks.length });
  for (const step of all) {
    const sa = stepsA.get(step);
    const sb = stepsB.get(step);
    const keysA = new Set((sa?.tasks ?? []).map(taskKey));
    const keysB = new Set((sb?.tasks ?? []).map(taskKey));
    const onlyA = (sa?.tasks ?? []).filter((t) => !keysB.has(taskKey(t))).map((t) => t.taskId);
    const onlyB = (sb?.tasks ?? []).filter((t) => !keysA.has(taskKey(t))).map((t) => t.taskId);
    let status: StepDiffStatus;
    if (!sb) status = 'only-a';
    else if (!sa) status = 'only-b';
    else if (sameCampaign && sa.runId === sb.runId && sa.source === sb.source) status = 'same';
    else if (sameCampaign) status = 'replayed';
    else status = onlyA.length === 0 && onlyB.length === 0 ? 'same-tasks' : 'differs';
    counts[status]++;
    if (status === 'same') continue;
    steps.push({
      step,
      status,
      ...(sa ? { a: side(sa) } : {}),
      ...(sb ? { b: side(sb) } : {}),
      onlyA: onlyA.sort(),
      onlyB: onlyB.sort(),
    });
  }
  const tasksA = new Set(a.entries.map((e) => e.taskId));
  const tasksB = new Set(b.entries.map((e) => e.taskId));
  const head = (m: Manifest) => ({
    checkpointId: m.checkpointId,
    trainerStep: m.trainerStep,
    root: m.root,
    tasks: m.entries.length,
  });
  return {
    a: head(a),
    b: head(b),
    sameRoot: a.root === b.root,
    steps,
    counts,
    tasksOnlyA: [...tasksA].filter((t) => !tasksB.has(t)).sort(),
    tasksOnlyB: [...tasksB].filter((t) => !tasksA.has(t)).sort(),
  };
}

// ---------------------------------------------------------------------------------------------
// Many roots in one pass

/** A manifest's root and counts, without its steps and entries. */
export interface ManifestSummary {
  checkpointId: string;
  root: string;
  tasks: number;
  groups: number;
}

/** The steps of a checkpoint's chain whose training is not the campaign's record: step -> what the run trained there. */
export function retrainedInChain(
  chain: readonly TrainingSegment[],
  checkpoints: Iterable<CheckpointRecord>,
): Map<number, StepTask[]> {
  const all = [...checkpoints];
  const out = new Map<number, StepTask[]>();
  for (const seg of chain)
    for (const [step, tasks] of retrainedByRun(all, seg.runId, seg.to))
      if (step > seg.from && step <= seg.to) out.set(step, tasks);
  return out;
}

interface Totals {
  steps: number[];
  groups: number;
  rollouts: number;
  /** The leaf hash of the entry as it stands (identity included); dropped when a step adds to it. */
  leaf?: string;
}

const byTaskId = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/**
 * The campaign's reported steps summed per task as they are read in step order, so that the root
 * of every checkpoint comes out of one pass over the record (`rods audit verify`, the gateway)
 * instead of one pass per checkpoint: a checkpoint at step s is these totals once steps 1..s are
 * in, with its chain's retrained steps swapped in for the record's. Gives the root buildManifest
 * gives for the same checkpoint; each unchanged entry's leaf hash is kept between checkpoints.
 */
export class ReportedTotals {
  private readonly byTask = new Map<string, Totals>();
  private last = 0;

  /** Adds a step's record (steps ascending). */
  add(step: number, tasks: readonly StepTask[]): void {
    if (step <= this.last) throw new ManifestError(`steps must come in order: ${step} after ${this.last}`);
    this.last = step;
    for (const t of tasks) {
      let e = this.byTask.get(t.taskId);
      if (!e) {
        e = { steps: [], groups: 0, rollouts: 0 };
        this.byTask.set(t.taskId, e);
      }
      if (e.steps.at(-1) !== step) e.steps.push(step);
      e.groups += t.groups;
      e.rollouts += t.rollouts;
      e.leaf = undefined;
    }
  }

  /** The task ids the totals hold. */
  taskIds(): IterableIterator<string> {
    return this.byTask.keys();
  }

  /**
   * The summary of `checkpointId`, whose steps are the ones added, each swapped for `swapped`'s
   * entry where it has one (`reported`: the record's tasks of the step, as added; `trained`: what the
   * checkpoint's run trained there).
   */
  summary(
    checkpointId: string,
    swapped: ReadonlyMap<number, { reported: readonly StepTask[]; trained: readonly StepTask[] }>,
    identity: (taskId: string) => TaskIdentity | undefined,
  ): ManifestSummary {
    // The entries a swap changes, rebuilt from the totals: steps of a task are unique.
    const changed = new Map<string, Totals>();
    const copy = (id: string) => {
      let e = changed.get(id);
      if (!e) {
        const base = this.byTask.get(id);
        e = { steps: base ? [...base.steps] : [], groups: base?.groups ?? 0, rollouts: base?.rollouts ?? 0 };
        changed.set(id, e);
      }
      return e;
    };
    for (const [step, { reported, trained }] of swapped) {
      for (const id of new Set(reported.map((t) => t.taskId))) {
        const e = copy(id);
        e.steps = e.steps.filter((s) => s !== step);
      }
      for (const t of reported) {
        const e = copy(t.taskId);
        e.groups -= t.groups;
        e.rollouts -= t.rollouts;
      }
      for (const t of trained) {
        const e = copy(t.taskId);
        if (!e.steps.includes(step)) e.steps.push(step);
        e.groups += t.groups;
        e.rollouts += t.rollouts;
      }
    }
    for (const e of changed.values()) e.steps.sort((a, b) => a - b);
    const ids = new Set(this.byTask.keys());
    for (const [id, e] of changed) if (e.steps.length > 0) ids.add(id);
    let groups = 0;
    const leaves: [string, string][] = [];
    for (const id of ids) {
      const own = this.byTask.get(id);
      const e = changed.get(id) ?? own!;
      if (e.steps.length === 0) continue;
      groups += e.groups;
      if (e === own && own.leaf !== undefined) {
        leaves.push([id, own.leaf]);
        continue;
      }
      const who = identity(id);
      if (!who)
        throw new ManifestError(
          `task ${id}, trained at step ${e.steps[0]}, has no seeding or injection in the campaign's log`,
        );
      const leaf = leafHash(
        manifestLeaf({ taskId: id, ...who, steps: e.steps, groups: e.groups, rollouts: e.rollouts }),
      );
      if (e === own) own.leaf = leaf;
      leaves.push([id, leaf]);
    }
    leaves.sort((a, b) => byTaskId(a[0], b[0]));
    return { checkpointId, root: merkleRootOfLeaves(leaves.map((l) => l[1])), tasks: leaves.length, groups };
  }
}
