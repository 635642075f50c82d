// What a checkpoint manifest reads of the log (analysis/manifest/): the campaign's recorded
// checkpoints (its checkpoints stream), the tasks each step trained (the per-step statistics
// records, found by campaign and step through migration 0016's index) and the identity of those
// tasks (content and first parent from their TaskSeeded or TaskInjected, found by task id through
// migration 0018's index).
import { candidateHash } from '../../../domain/candidate.js';
import { streams } from '../../../domain/ids.js';
import type { CheckpointRecord, StepTask, TaskIdentity } from '../../../domain/manifest.js';
import {
  append,
  type Queryable,
  readStream,
  readStreamOf,
  type TypedRecordedEvent,
  typedEvent,
} from './event-store.js';
import { taskDecisionEvents } from './task-decisions.js';

export type CheckpointEvent = TypedRecordedEvent<'CheckpointSaved'>;

/** The campaign's CheckpointSaved events, in the order recorded. */
export function checkpointEvents(db: Queryable, campaignId: string): Promise<CheckpointEvent[]> {
  return readStreamOf(db, streams.checkpoints(campaignId), ['CheckpointSaved']);
}

/**
 * The campaign's CheckpointSaved events after version `after` of its checkpoints stream, in the
 * order recorded (a stream's versions commit in order, so a reader that keeps the last version it
 * saw misses none).
 */
export async function checkpointEventsAfter(
  db: Queryable,
  campaignId: string,
  after: number,
): Promise<CheckpointEvent[]> {
  const events = await readStream(db, streams.checkpoints(campaignId), { fromVersion: after + 1 });
  return events.filter((e) => e.type === 'CheckpointSaved') as unknown as CheckpointEvent[];
}

/** A recorded checkpoint as the manifest reads it. */
export function checkpointRecord(e: CheckpointEvent['payload']): CheckpointRecord {
  return {
    checkpointId: e.checkpointId,
    runId: e.runId,
    trainerStep: Number(e.trainerStep),
    resumedFrom: e.resumedFrom ?? null,
    retrainedSteps: e.retrainedSteps.map((r) => ({
      step: Number(r.step),
      tasks: r.taskId.map((taskId, i) => ({ taskId, groups: 1, rollouts: r.rollouts[i] ?? 0 })),
    })),
  };
}

/** Records a checkpoint (its id derives from campaign and checkpoint: a retry records nothing twice). */
export async function recordCheckpoint(
  db: Queryable,
  payload: Parameters<typeof typedEvent<'CheckpointSaved'>>[1],
): Promise<boolean> {
  const r = await append(db, streams.checkpoints(payload.campaignId), 'any', [
    typedEvent('CheckpointSaved', payload, { producer: 'rods-gateway' }),
  ]);
  return r.appended;
}

// Steps read per query: a window bounds one result's size on campaigns of any length.
const STEP_WINDOW = 250;

/**
 * Calls `onStep` for every step 1..`through` that the campaign's statistics records hold, in step
 * order, with the tasks whose reward groups of the step were applied and their groups and rollouts
 * there (the differences of the records' running counts).
 */
export async function forEachRecordedStep(
  db: Queryable,
  campaignId: string,
  through: number,
  onStep: (step: number, tasks: StepTask[]) => void | Promise<void>,
): Promise<void> {
  const seen = new Map<string, { groups: number; rollouts: number }>();
  for (let from = 1; from <= through; from += STEP_WINDOW) {
    const to = Math.min(through, from + STEP_WINDOW - 1);
    // The type is spelled out so that the planner matches the partial index of migration 0016.
    const { rows } = await db.query<{
      step: string;
      task_id: string[];
      group_count: number[];
      count: number[];
    }>(
      `select (payload->>'step')::text as step, payload->'tasks'->'taskId' as task_id,
              payload->'tasks'->'groupCount' as group_count, payload->'tasks'->'count' as count
         from events
        where type = 'StepStatsRecorded' and payload->>'campaignId' = $1
          and (payload->>'step')::bigint between $2 and $3
        order by (payload->>'step')::bigint, transaction_id, position`,
      [campaignId, from, to],
    );
    let step: number | undefined;
    let tasks = new Map<string, StepTask>();
    const flush = async () => {
      if (step !== undefined && tasks.size > 0) await onStep(step, [...tasks.values()]);
    };
    for (const r of rows) {
      const s = Number(r.step);
      if (s !== step) {
        await flush();
        step = s;
        tasks = new Map();
      }
      for (let i = 0; i < r.task_id.length; i++) {
        const id = r.task_id[i]!;
        const groups = Number(r.group_count[i]);
        const rollouts = Number(r.count[i]);
        const before = seen.get(id) ?? { groups: 0, rollouts: 0 };
        seen.set(id, { groups, rollouts });
        const t = tasks.get(id) ?? { taskId: id, groups: 0, rollouts: 0 };
        t.groups += groups - before.groups;
        t.rollouts += rollouts - before.rollouts;
        tasks.set(id, t);
      }
    }
    await flush();
  }
}

/**
 * The identity of these tasks in the campaign: the SHA-256 of their content as their TaskSeeded or
 * TaskInjected holds it (recomputed, so an edited record shows), and the human seed at the root of
 * their lineage (a seed's own id; an injected task's first parent's root), read generation by
 * generation. A task with neither event is absent.
 */
export async function taskIdentities(
  db: Queryable,
  campaignId: string,
  taskIds: readonly string[],
): Promise<Map<string, TaskIdentity>> {
  const content = new Map<string, string>();
  const firstParent = new Map<string, string | null>();
  let wanted = [...new Set(taskIds)];
  while (wanted.length > 0) {
    const events = await taskDecisionEvents(db, campaignId, wanted);
    for (const e of events) {
      if (e.type !== 'TaskSeeded' && e.type !== 'TaskInjected') continue;
      const p = e.payload as { taskId: string; task: string; parents?: string[] };
      if (firstParent.has(p.taskId)) continue;
      content.set(p.taskId, candidateHash(JSON.parse(p.task) as object));
      firstParent.set(p.taskId, e.type === 'TaskSeeded' ? null : (p.parents?.[0] ?? null));
    }
    // Parents not yet read are the next generation (a parent with no record ends its branch).
    const next = new Set<string>();
    for (const id of wanted) {
      const parent = firstParent.get(id);
      if (parent && !firstParent.has(parent)) next.add(parent);
    }
    for (const id of wanted) if (!firstParent.has(id)) firstParent.set(id, null);
    wanted = [...next];
  }
  const rootOf = (id: string): string => {
    const seen = new Set<string>();
    let cur = id;
    for (let parent = firstParent.get(cur); parent && !seen.has(parent); parent = firstParent.get(cur)) {
      seen.add(cur);
      cur = parent;
    }
    return cur;
  };
  const out = new Map<string, TaskIdentity>();
  for (const id of taskIds) {
    const hash = content.get(id);
    if (hash !== undefined) out.set(id, { contentHash: hash, lineageRoot: rootOf(id) });
  }
  return out;
}

/** The campaigns with recorded checkpoints whose checkpoints stream is in scope (a stream id or prefix; none: all). */
export async function campaignsWithCheckpoints(
  db: Queryable,
  scope: { streamId?: string; streamPrefix?: string } = {},
): Promise<string[]> {
  const prefix = streams.checkpoints('');
  const { rows } = await db.query<{ stream_id: string }>(
    `select stream_id from streams where stream_id like $1 || '%' order by stream_id`,
    [prefix.replace(/[\\%_]/g, '\\$&')],
  );
  return rows
    .map((r) => r.stream_id)
    .filter(
      (s) => (scope.streamId === undefined || s === scope.streamId) && s.startsWith(scope.streamPrefix ?? ''),
    )
    .map((s) => s.slice(prefix.length));
}
