// A few tasks' history from the aggregator's per-step statistics records (StepStatsRecorded):
// what the lineage explorer's band changes and the dashboard's reward line read. A record holds
// every task one batch changed in one step, so a task's history is found by step, never by
// walking a campaign's events: migration 0016 indexes the records by campaign and step, and a
// read covers a window of the newest steps, whatever the campaign's age. Campaigns recorded before
// the per-step record carry TaskStatsUpdated and TaskBandChanged per task; those are found by task
// (the same migration indexes them by campaign and task).
import type { StepStatsEntry } from '../../../domain/task-stats.js';
import type { EventPayloads } from '../../../schemas/types.generated.js';
import { EVENT_COLUMNS, type EventRow, type Queryable, toEvents } from './event-store.js';
import type { RecordedEvent } from './recorded-event.js';

/** How many of the newest recorded steps a history covers unless told otherwise. */
export const DEFAULT_HISTORY_STEPS = 100;

/** One task's entry in one step's record. */
export interface TaskStepEntry extends StepStatsEntry {
  step: number;
}

export interface TaskStepHistory {
  /** Entries of the tasks, in the order recorded. */
  entries: TaskStepEntry[];
  /** The steps covered: [from, to] (null: the campaign has no per-step record). */
  window: { from: number; to: number } | null;
}

/** The newest step the campaign's per-step records cover (undefined: none). */
export async function lastRecordedStep(db: Queryable, campaignId: string): Promise<number | undefined> {
  const { rows } = await db.query<{ step: string | null }>(
    `select max((payload->>'step')::bigint)::text as step from events
      where type = 'StepStatsRecorded' and payload->>'campaignId' = $1`,
    [campaignId],
  );
  return rows[0]?.step == null ? undefined : Number(rows[0].step);
}

/**
 * The entries of these tasks in the campaign's per-step records of the newest `steps` recorded
 * steps (up to `toStep` when given).
 */
export async function taskStepHistory(
  db: Queryable,
  campaignId: string,
  taskIds: readonly string[],
  opts: { steps?: number; toStep?: number } = {},
): Promise<TaskStepHistory> {
  const last = await lastRecordedStep(db, campaignId);
  if (last === undefined || taskIds.length === 0) return { entries: [], window: null };
  const to = Math.min(last, opts.toStep ?? last);
  const from = Math.max(0, to - (opts.steps ?? DEFAULT_HISTORY_STEPS) + 1);
  // A record's tasks are columns: a task's entry is item i of each column, i its place in taskId.
  const { rows } = await db.query<{ step: string; entry: StepStatsEntry }>(
    `select (e.payload->>'step')::text as step,
            (select jsonb_object_agg(c.key, c.value -> (t.ord::int - 1)) from jsonb_each(e.payload->'tasks') c) as entry
       from events e, jsonb_array_elements_text(e.payload->'tasks'->'taskId') with ordinality as t(task_id, ord)
      where e.type = 'StepStatsRecorded' and e.payload->>'campaignId' = $1
        and (e.payload->>'step')::bigint between $2 and $3
        and t.task_id = any($4::text[])
      order by e.transaction_id, e.position, t.ord`,
    [campaignId, from, to, taskIds],
  );
  return { entries: rows.map((r) => ({ ...r.entry, step: Number(r.step) })), window: { from, to } };
}

/** The per-task statistics events of a campaign recorded before the per-step record, for these tasks. */
export async function legacyTaskEvents<N extends 'TaskStatsUpdated' | 'TaskBandChanged'>(
  db: Queryable,
  campaignId: string,
  type: N,
  taskIds: readonly string[],
): Promise<(RecordedEvent & { payload: EventPayloads[N] })[]> {
  if (taskIds.length === 0) return [];
  // The type is spelled out so that the planner matches the partial index of migration 0016.
  const { rows } = await db.query<EventRow>(
    `select ${EVENT_COLUMNS} from events
      where type in ('TaskStatsUpdated', 'TaskBandChanged') and type = $2
        and payload->>'campaignId' = $1 and payload->>'taskId' = any($3::text[])
      order by transaction_id, position`,
    [campaignId, type, taskIds],
  );
  return toEvents(rows) as (RecordedEvent & { payload: EventPayloads[N] })[];
}
