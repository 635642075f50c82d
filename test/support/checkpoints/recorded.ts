// A checkpoint recorded straight into the store, as the gateway records one a trainer reports:
// for tests that need a checkpoint (and its manifest root) without a trainer.
import { eventIds } from '../../../domain/ids.js';
import { recordCheckpoint } from '../../../platform/store/events/checkpoints.js';
import type { Queryable } from '../../../platform/store/events/event-store.js';

export function recordTestCheckpoint(
  db: Queryable,
  campaignId: string,
  c: { checkpointId: string; trainerStep: number; manifestRoot: string; runId?: string },
) {
  return recordCheckpoint(db, {
    eventId: eventIds.checkpointSaved(campaignId, c.checkpointId),
    campaignId,
    checkpointId: c.checkpointId,
    runId: c.runId ?? 'run-1',
    trainerStep: c.trainerStep,
    resumedFrom: null,
    digest: null,
    retrainedSteps: [],
    manifestTasks: 0,
    manifestGroups: 0,
    manifestRoot: c.manifestRoot,
    occurredAt: Date.now(),
  });
}
