// Reads what `rods lineage` needs from the event store (not the projections): the campaign's
// decision stream (campaign-<id>: TaskSeeded, SeedSelected, TaskInjected, TaskRetired,
// PoolPruned), its CandidateValidated outcomes, the synthesis streams (synthesis-<id>:
// SynthesisStarted, StageCompleted) of the task's ancestry, and those tasks' band changes from
// the aggregator's per-step statistics records of the newest steps (StepStatsRecorded; the
// TaskBandChanged events of campaigns recorded before them).
import { streams } from '../../domain/ids.js';
import { statsOfStepEntry } from '../../domain/task-stats.js';
import {
  type Queryable,
  type RecordedEvent,
  readCampaignEventsOf,
  readStream,
} from '../../platform/store/events/event-store.js';
import { legacyTaskEvents, taskStepHistory } from '../../platform/store/events/task-steps.js';
import { campaignsOfTask } from '../../platform/store/pool/members.js';
import type { EventName } from '../../schemas/types.generated.js';
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

const eventsOfCampaign = async (
  db: Queryable,
  campaignId: string,
  types: EventName[],
  taskIds?: string[],
): Promise<LineageEvent[]> =>
  (await readCampaignEventsOf(db, campaignId, types, { taskIds })).map(toLineageEvent);

/** Whether the campaign has any event in its decision stream. */
export async function campaignHasEvents(db: Queryable, campaignId: string): Promise<boolean> {
  return (await readStream(db, streams.campaign(campaignId), { limit: 1 })).length > 0;
}

/**
 * The lineage index of a campaign. With `taskId`, also the synthesis streams and band changes of
 * that task's ancestry (what a lineage query shows); without, the pool's structure only (enough
 * for the per-generation statistics).
 */
export async function loadLineageIndex(
  db: Queryable,
  campaignId: string,
  taskId?: string,
  opts: { steps?: number } = {},
): Promise<LineageIndex> {
  const decisions = (await readStream(db, streams.campaign(campaignId))).map(toLineageEvent);
  const validated = await eventsOfCampaign(db, campaignId, ['CandidateValidated']);
  const base = new LineageIndex(campaignId, [...decisions, ...validated]);
  if (taskId === undefined || !base.knows(taskId)) return base;

  // The ancestry: the task, its parents, theirs ... up to the human seeds.
  const ancestry = new Set<string>();
  const todo = [taskId];
  while (todo.length > 0) {
    const id = todo.pop()!;
    if (ancestry.has(id)) continue;
    ancestry.add(id);
    for (const p of base.parentsOf(id)) if (base.knows(p)) todo.push(p);
  }
  const synthesisEvents: LineageEvent[] = [];
  for (const id of ancestry) {
    const sid = base.validatedFor(id)?.payload.synthesisId;
    if (typeof sid !== 'string') continue;
    for (const e of await readStream(db, streams.synthesis(sid)))
      if (e.type === 'SynthesisStarted' || e.type === 'StageCompleted')
        synthesisEvents.push(toLineageEvent(e));
  }
  const legacyBands = (await legacyTaskEvents(db, campaignId, 'TaskBandChanged', [...ancestry])).map(
    toLineageEvent,
  );
  const index = new LineageIndex(campaignId, [
    ...decisions,
    ...validated,
    ...synthesisEvents,
    ...legacyBands,
  ]);
  const recorded = await taskStepHistory(db, campaignId, [...ancestry], { steps: opts.steps });
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
