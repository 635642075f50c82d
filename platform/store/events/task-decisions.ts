// A few tasks' decisions in one campaign, found by task id: what a lineage lookup reads of a
// task's ancestry instead of the campaign's whole decision stream. Each read goes through an index
// (migration 0018 for the decisions, validations and prunings by task, the events' unique event id
// for a selection, the streams' (stream, version) key for the synthesis streams), so its cost
// follows the tasks asked for, not the campaign's age.
import { streams } from '../../../domain/ids.js';
import { EVENT_COLUMNS, type EventRow, type Queryable, toEvents } from './event-store.js';
import type { RecordedEvent } from './recorded-event.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * The TaskSeeded, TaskInjected and TaskRetired of these tasks in the campaign's decision stream,
 * and the campaign's CandidateValidated of these candidates (a candidate id is the task id it
 * becomes), in log order.
 */
export async function taskDecisionEvents(
  db: Queryable,
  campaignId: string,
  taskIds: readonly string[],
): Promise<RecordedEvent[]> {
  if (taskIds.length === 0) return [];
  // The types are spelled out so that the planner matches the partial indexes of migration 0018.
  const { rows } = await db.query<EventRow>(
    `select ${EVENT_COLUMNS} from events
      where (type in ('TaskSeeded', 'TaskInjected', 'TaskRetired') and stream_id = $2
             and payload->>'campaignId' = $1 and payload->>'taskId' = any($3::text[]))
         or (type = 'CandidateValidated'
             and payload->>'campaignId' = $1 and payload->>'candidateId' = any($3::text[]))
      order by transaction_id, position`,
    [campaignId, streams.campaign(campaignId), taskIds],
  );
  return toEvents(rows);
}

/** The SeedSelected events of the campaign's decision stream with these event ids. */
export async function selectionEvents(
  db: Queryable,
  campaignId: string,
  eventIds: readonly string[],
): Promise<RecordedEvent[]> {
  // An id that is no UUID names no event (and would fail the cast).
  const ids = [...new Set(eventIds)].filter((id) => UUID.test(id));
  if (ids.length === 0) return [];
  const { rows } = await db.query<EventRow>(
    `select ${EVENT_COLUMNS} from events
      where event_id = any($2::uuid[]) and type = 'SeedSelected' and stream_id = $1
      order by stream_version`,
    [streams.campaign(campaignId), ids],
  );
  return toEvents(rows);
}

/** The PoolPruned events of the campaign's decision stream that prune any of these tasks, in stream order. */
export async function poolPrunedEventsOf(
  db: Queryable,
  campaignId: string,
  taskIds: readonly string[],
): Promise<RecordedEvent[]> {
  if (taskIds.length === 0) return [];
  // One containment pattern per task: the GIN index of migration 0018 finds the events holding it.
  const patterns = taskIds.map((taskId) => JSON.stringify({ campaignId, pruned: [{ taskId }] }));
  const { rows } = await db.query<EventRow>(
    `select ${EVENT_COLUMNS} from events
      where type = 'PoolPruned' and payload @> any($2::jsonb[]) and stream_id = $1
      order by stream_version`,
    [streams.campaign(campaignId), patterns],
  );
  return toEvents(rows);
}

/**
 * The events of these types in these streams: stream by stream in the order given (a stream named
 * twice comes twice), each in version order.
 */
export async function readStreamsOf(
  db: Queryable,
  streamIds: readonly string[],
  types: readonly string[],
): Promise<RecordedEvent[]> {
  if (streamIds.length === 0) return [];
  const { rows } = await db.query<EventRow>(
    `select ${EVENT_COLUMNS}
       from unnest($1::text[]) with ordinality as s(id, ord) join events on events.stream_id = s.id
      where events.type = any($2::text[])
      order by s.ord, events.stream_version`,
    [streamIds, types],
  );
  return toEvents(rows);
}
