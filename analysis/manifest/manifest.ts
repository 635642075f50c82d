// Checkpoint manifests from the log: what the gateway computes when it records a checkpoint, what
// `rods manifest` shows and diffs, and what `rods audit verify` recomputes and compares with the
// root recorded in each CheckpointSaved. The pure part (chain, trained steps, entries, root, diff)
// is domain/manifest.ts; this module reads the log for it.
import {
  buildManifest,
  type CheckpointRecord,
  type Manifest,
  ManifestError,
  type ManifestSummary,
  ReportedTotals,
  recordedUpTo,
  retrainedInChain,
  type StepTask,
  stepTaskIds,
  type TaskIdentity,
  trainedSteps,
  trainingChain,
} from '../../domain/manifest.js';
import {
  type CheckpointEvent,
  checkpointEvents,
  checkpointRecord,
  forEachRecordedStep,
  taskIdentities,
} from '../../platform/store/events/checkpoints.js';
import type { Queryable } from '../../platform/store/events/event-store.js';

export { ManifestError };

/**
 * The manifest of `target` among the campaign's recorded checkpoints (in record order; target itself
 * need not be recorded yet): only those recorded before it count.
 */
export async function computeManifest(
  db: Queryable,
  campaignId: string,
  target: CheckpointRecord,
  recorded: readonly CheckpointRecord[],
): Promise<Manifest> {
  const checkpoints = recordedUpTo(recorded, target);
  const chain = trainingChain(target, new Map(checkpoints.map((c) => [c.checkpointId, c])));
  // Only the steps a run did not train again come from the campaign's record.
  const reported = new Map<number, StepTask[]>();
  await forEachRecordedStep(db, campaignId, target.trainerStep, (step, tasks) => {
    reported.set(step, tasks);
  });
  const steps = trainedSteps(chain, checkpoints, (s) => reported.get(s));
  const identities = await taskIdentities(db, campaignId, stepTaskIds(steps));
  return buildManifest(target, chain, steps, (t) => identities.get(t));
}

export interface RecordedManifest {
  event: CheckpointEvent;
  manifest: Manifest;
}

/** A recorded checkpoint's manifest, recomputed from the log. */
export async function recordedManifest(
  db: Queryable,
  campaignId: string,
  checkpointId: string,
): Promise<RecordedManifest> {
  const events = await checkpointEvents(db, campaignId);
  const event = events.find((e) => e.payload.checkpointId === checkpointId);
  if (!event) {
    const known = events.map((e) => e.payload.checkpointId);
    throw new ManifestError(
      `campaign ${campaignId} has no checkpoint ${checkpointId}` +
        (known.length ? ` (recorded: ${known.slice(-10).join(', ')})` : ' (none recorded)'),
    );
  }
  const records = events.map((e) => checkpointRecord(e.payload));
  const manifest = await computeManifest(db, campaignId, checkpointRecord(event.payload), records);
  return { event, manifest };
}

export interface ManifestCheck {
  campaignId: string;
  checkpointId: string;
  trainerStep: number;
  recordedRoot: string;
  recomputedRoot: string | null;
  ok: boolean;
  problem?: string;
}

/** A checkpoint to summarize: its step and the steps of its chain trained again (what each run trained there). */
export interface SummaryTarget {
  checkpointId: string;
  trainerStep: number;
  swap: ReadonlyMap<number, StepTask[]>;
}

/**
 * The root and counts of each target's manifest among the recorded checkpoints (`recorded` in
 * record order; each target reads those recorded before it, domain/manifest.ts recordedUpTo), from
 * one pass over the campaign's step records up to the latest target. A target whose chain or tasks
 * fail gets its ManifestError instead.
 */
export async function manifestSummaries(
  db: Queryable,
  campaignId: string,
  targets: readonly CheckpointRecord[],
  recorded: readonly CheckpointRecord[],
): Promise<Map<string, ManifestSummary | ManifestError>> {
  const out = new Map<string, ManifestSummary | ManifestError>();
  const ready: SummaryTarget[] = [];
  for (const t of targets) {
    const upTo = recordedUpTo(recorded, t);
    try {
      const chain = trainingChain(t, new Map(upTo.map((c) => [c.checkpointId, c])));
      ready.push({
        checkpointId: t.checkpointId,
        trainerStep: t.trainerStep,
        swap: retrainedInChain(chain, upTo),
      });
    } catch (e) {
      if (!(e instanceof ManifestError)) throw e;
      out.set(t.checkpointId, e);
    }
  }
  for (const [id, m] of await summarize(db, campaignId, ready)) out.set(id, m);
  return out;
}

/**
 * The root and counts of each target's manifest from one pass over the campaign's step records up
 * to the latest target (domain/manifest.ts ReportedTotals): memory bounded by the tasks trained,
 * not by the steps.
 */
export async function summarize(
  db: Queryable,
  campaignId: string,
  targets: readonly SummaryTarget[],
): Promise<Map<string, ManifestSummary | ManifestError>> {
  const out = new Map<string, ManifestSummary | ManifestError>();
  // The record of every step some chain trained again: what its swap takes out.
  const keep = new Set<number>();
  for (const t of targets) for (const step of t.swap.keys()) keep.add(step);
  const kept = new Map<number, StepTask[]>();
  const pending = [...targets].sort((a, b) => a.trainerStep - b.trainerStep);
  const totals = new ReportedTotals();
  const identities = new Map<string, TaskIdentity | null>();
  let next = 0;
  const summarizeBefore = async (step: number) => {
    for (; next < pending.length && pending[next]!.trainerStep < step; next++) {
      const t = pending[next]!;
      const wanted = new Set<string>();
      for (const id of totals.taskIds()) if (!identities.has(id)) wanted.add(id);
      for (const tasks of t.swap.values())
        for (const x of tasks) if (!identities.has(x.taskId)) wanted.add(x.taskId);
      if (wanted.size > 0) {
        const found = await taskIdentities(db, campaignId, [...wanted]);
        for (const id of wanted) identities.set(id, found.get(id) ?? null);
      }
      const swapped = new Map(
        [...t.swap].map(([s, trained]) => [s, { reported: kept.get(s) ?? [], trained }] as const),
      );
      try {
        out.set(
          t.checkpointId,
          totals.summary(t.checkpointId, swapped, (id) => identities.get(id) ?? undefined),
        );
      } catch (e) {
        if (!(e instanceof ManifestError)) throw e;
        out.set(t.checkpointId, e);
      }
    }
  };
  const through = pending.at(-1)?.trainerStep ?? 0;
  await forEachRecordedStep(db, campaignId, through, async (step, tasks) => {
    await summarizeBefore(step);
    totals.add(step, tasks);
    if (keep.has(step)) kept.set(step, tasks);
  });
  await summarizeBefore(Number.POSITIVE_INFINITY);
  return out;
}

/** Recomputes every recorded checkpoint's manifest root of the campaign and compares it with the recorded one. */
export async function verifyManifests(db: Queryable, campaignId: string): Promise<ManifestCheck[]> {
  const events = await checkpointEvents(db, campaignId);
  const records = events.map((e) => checkpointRecord(e.payload));
  const summaries = await manifestSummaries(db, campaignId, records, records);
  return events.map((e) => {
    const base = {
      campaignId,
      checkpointId: e.payload.checkpointId,
      trainerStep: Number(e.payload.trainerStep),
      recordedRoot: e.payload.manifestRoot,
    };
    const m = summaries.get(e.payload.checkpointId)!;
    if (m instanceof ManifestError) return { ...base, recomputedRoot: null, ok: false, problem: m.message };
    const ok = m.root === e.payload.manifestRoot && m.tasks === e.payload.manifestTasks;
    return {
      ...base,
      recomputedRoot: m.root,
      ok,
      ...(ok
        ? {}
        : {
            problem: `the manifest recomputed from the log (${m.tasks} tasks, root ${m.root}) differs from the one recorded (${e.payload.manifestTasks} tasks, root ${e.payload.manifestRoot}): a manifested task's content, lineage or rewards were altered`,
          }),
    };
  });
}
