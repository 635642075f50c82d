// Reads what `rods lineage` needs from the event store (not the projections). A lookup of one
// task reads its ancestry only, found by task id through indexes (migration 0018), so it costs the
// same at step 10,000 of a campaign as at step 100: generation by generation from the task up to
// the human seeds, each task's TaskSeeded, TaskInjected, TaskRetired and CandidateValidated, then
// the ancestry's synthesis streams (synthesis-<id>: SynthesisStarted, StageCompleted), the
// SeedSelected each derivation names (by event id) and the PoolPruned that name its tasks, and
// those tasks' band changes from the aggregator's per-step statistics records of the newest steps
// (StepStatsRecorded; the TaskBandChanged events of campaigns recorded before them). The
// per-generation summary (no task) reads the campaign's whole decision stream (campaign-<id>:
// TaskSeeded, SeedSelected, TaskInjected, TaskRetired, PoolPruned) and its CandidateValidated.
import { streams } from '../../domain/ids.js';
import { statsOfStepEntry } from '../../domain/task-stats.js';
import {
  type Queryable,
  type RecordedEvent,
  readCampaignEventsOf,
  readStream,
} from '../../platform/store/events/event-store.js';
import {
  poolPrunedEventsOf,
  readStreamsOf,
  selectionEvents,
  taskDecisionEvents,
} from '../../platform/store/events/task-decisions.js';
import { legacyTaskEvents, taskStepHistory } from '../../platform/store/events/task-steps.js';
import { campaignsOfTask } from '../../platform/store/pool/members.js';
import { type LineageEvent, LineageIndex } from './model.js';

export { campaignsOfTask };

const toLineageEvent = (e: RecordedEvent): LineageEvent => ({
  eventId: e.eventId,
  streamId: e.streamId,
  position: e.position,
  type: e.type,
  payload: (e.payload ?? {}) as Record<string, unknown>,
  metadata: (e.metadata ?? {}) as Record<string, unknown>,
});

const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);

/** Whether the campaign has any event in its decision stream. */
export async function campaignHasEvents(db: Queryable, campaignId: string): Promise<boolean> {
  return (await readStream(db, streams.campaign(campaignId), { limit: 1 })).length > 0;
}

/**
 * The lineage index of a campaign. With `taskId`, the index of that task's ancestry only, with its
 * synthesis streams and band changes: `lineage(taskId)` is what an index of the whole campaign
 * gives (undefined when the campaign has no record of the task); other tasks are not in it.
 * Without, the whole campaign's pool structure (enough for the per-generation statistics).
 */
export async function loadLineageIndex(
  db: Queryable,
  campaignId: string,
  taskId?: string,
  opts: { steps?: number } = {},
): Promise<LineageIndex> {
  if (taskId === undefined) {
    const decisions = (await readStream(db, streams.campaign(campaignId))).map(toLineageEvent);
    const validated = (await readCampaignEventsOf(db, campaignId, ['CandidateValidated'])).map(
      toLineageEvent,
    );
    return new LineageIndex(campaignId, [...decisions, ...validated]);
  }

  // The ancestry, one generation a query: the task, its parents, theirs ... up to the human seeds.
  // A task's parents are final once its own events are read (parentsOf reads only those).
  const read: LineageEvent[] = [];
  const asked = new Set<string>();
  let base = new LineageIndex(campaignId, []);
  for (let todo = [taskId]; todo.length > 0; ) {
    for (const id of todo) asked.add(id);
    read.push(...(await taskDecisionEvents(db, campaignId, todo)).map(toLineageEvent));
    base = new LineageIndex(campaignId, read);
    // No record of the task: lineage(taskId) is undefined, after one query.
    if (!base.knows(taskId)) return base;
    const next = new Set<string>();
    for (const id of todo) for (const p of base.parentsOf(id)) if (!asked.has(p)) next.add(p);
    todo = [...next];
  }
  // Parents without a record stay out, as lineage() reports them missing.
  const ancestry = [...asked].filter((id) => base.knows(id));

  const synthesisStreams: string[] = [];
  for (const id of ancestry) {
    const sid = base.validatedFor(id)?.payload.synthesisId;
    if (typeof sid === 'string') synthesisStreams.push(streams.synthesis(sid));
  }
  const synthesisEvents = (
    await readStreamsOf(db, synthesisStreams, ['SynthesisStarted', 'StageCompleted'])
  ).map(toLineageEvent);
  // The selection a derivation names: the candidate's lineage, else its synthesis's start.
  const selectionIds: string[] = [];
  for (const id of ancestry)
    for (const v of base.validated.get(id) ?? []) {
      const sel = str((v.metadata.lineage as { selectionEventId?: unknown } | undefined)?.selectionEventId);
      if (sel) selectionIds.push(sel);
    }
  for (const e of synthesisEvents) {
    const sel = e.type === 'SynthesisStarted' ? str(e.payload.selectionEventId) : undefined;
    if (sel) selectionIds.push(sel);
  }
  const selections = (await selectionEvents(db, campaignId, selectionIds)).map(toLineageEvent);
  const pruned = (await poolPrunedEventsOf(db, campaignId, ancestry)).map(toLineageEvent);
  const legacyBands = (await legacyTaskEvents(db, campaignId, 'TaskBandChanged', ancestry)).map(
    toLineageEvent,
  );
  const index = new LineageIndex(campaignId, [
    ...read,
    ...selections,
    ...pruned,
    ...synthesisEvents,
    ...legacyBands,
  ]);
  const recorded = await taskStepHistory(db, campaignId, ancestry, { steps: opts.steps });
  if (recorded.window)
    index.addBandChanges(
      recorded.entries
        .filter((e) => e.bandBefore !== e.band)
        .map((e) => ({
          taskId: e.taskId,
          from: e.bandBefore,
          to: e.band,
          step: e.step,
          stats: statsOfStepEntry(e),
        })),
      recorded.window,
    );
  return index;
}
