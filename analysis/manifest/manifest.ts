// Checkpoint manifests from the log: what the gateway computes when it records a checkpoint, what
// `rods manifest` shows and diffs, and what `rods audit verify` recomputes and compares with the
// root recorded in each CheckpointSaved. The pure part (chain, trained steps, entries, root, diff)
// is domain/manifest.ts; this module reads the log for it.
import {
  buildManifest,
  type CheckpointRecord,
  type Manifest,
  ManifestError,
  type StepTask,
  stepTaskIds,
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

/** The manifest of `target` among the campaign's recorded checkpoints (target itself need not be recorded yet). */
export async function computeManifest(
  db: Queryable,
  campaignId: string,
  target: CheckpointRecord,
  recorded: readonly CheckpointRecord[],
): Promise<Manifest> {
  const byId = new Map(recorded.map((c) => [c.checkpointId, c]));
  byId.set(target.checkpointId, target);
  const chain = trainingChain(target, byId);
  const checkpoints = [...byId.values()];
  // Only the steps a run did not train again come from the campaign's record.
  const reported = new Map<number, StepTask[]>();
  await forEachRecordedStep(db, campaignId, target.trainerStep, (step, tasks) => reported.set(step, tasks));
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

/** Recomputes every recorded checkpoint's manifest root of the campaign and compares it with the recorded one. */
export async function verifyManifests(db: Queryable, campaignId: string): Promise<ManifestCheck[]> {
  const events = await checkpointEvents(db, campaignId);
  const records = events.map((e) => checkpointRecord(e.payload));
  const out: ManifestCheck[] = [];
  for (const e of events) {
    const base = {
      campaignId,
      checkpointId: e.payload.checkpointId,
      trainerStep: Number(e.payload.trainerStep),
      recordedRoot: e.payload.manifestRoot,
    };
    try {
      const m = await computeManifest(db, campaignId, checkpointRecord(e.payload), records);
      const ok = m.root === e.payload.manifestRoot && m.entries.length === e.payload.manifestTasks;
      out.push({
        ...base,
        recomputedRoot: m.root,
        ok,
        ...(ok
          ? {}
          : {
              problem: `the manifest recomputed from the log (${m.entries.length} tasks, root ${m.root}) differs from the one recorded (${e.payload.manifestTasks} tasks, root ${e.payload.manifestRoot}): a manifested task's content, lineage or rewards were altered`,
            }),
      });
    } catch (err) {
      out.push({ ...base, recomputedRoot: null, ok: false, problem: (err as Error).message });
    }
  }
  return out;
}
