// Reads of a campaign's events that planning and the analysis tools make (the event log's SQL
// stays in platform/store/events/): the synthesis latencies, each seed's latest outcomes, and the
// pages and payload keys an export reads. (The synthesis funnel is a projection:
// platform/store/pool/funnel.ts.)
import type pg from 'pg';
import { streams } from '../../../domain/ids.js';
import { EVENT_COLUMNS, type EventRow, type Queryable, toEvents } from './event-store.js';
import type { RecordedEvent } from './recorded-event.js';

export interface LatencyRow {
  synthesis_id: string;
  seed: string | null;
  step: string | null;
  type: string;
  reason: string | null;
  ms: number;
}

/** How many runs synthesisLatencyRows reads by default (the dashboard's recent series). */
export const LATENCY_RUNS = 200;

/**
 * The first outcome of each of the campaign's newest `runs` synthesis runs (by start) and how long
 * after its start it came, oldest outcome first; a run still without an outcome is left out. The
 * runs are found through their SynthesisStarted index and each outcome in the run's own stream, so
 * the cost follows `runs`, not the campaign's age.
 */
export async function synthesisLatencyRows(
  db: Queryable,
  campaignId: string,
  runs: number = LATENCY_RUNS,
): Promise<LatencyRow[]> {
  const { rows } = await db.query<LatencyRow>(
    // An Augment variant's outcomes are in its own stream (its own synthesis id), not its run's.
    `select s.id as synthesis_id, s.seed, sel.payload->>'step' as step, o.type, o.reason,
            (extract(epoch from (o.recorded_at - s.recorded_at)) * 1000)::float8 as ms
       from (select payload->>'synthesisId' as id, payload->>'seedTaskId' as seed, recorded_at,
                    case when payload->>'selectionEventId' ~* '^[0-9a-f-]{36}$'
                         then (payload->>'selectionEventId')::uuid end as selection
               from events
              where payload->>'campaignId' = $1 and type = 'SynthesisStarted'
              order by transaction_id desc, position desc
              limit $2) s
      cross join lateral (
        select type, payload->>'reasonCode' as reason, recorded_at
          from events
         where stream_id = $3::text || s.id and type in ('CandidateValidated', 'CandidateRejected')
         order by stream_version
         limit 1) o
       left join events sel on sel.event_id = s.selection
      order by o.recorded_at`,
    [campaignId, runs, streams.synthesis('')],
  );
  return rows;
}

/** One page (2,000) of the campaign's events after a cursor, in read order; `types` filters them. */
export async function campaignEventPage(
  c: pg.ClientBase,
  campaignId: string,
  after: { tx: string; pos: number },
  types?: string[],
): Promise<RecordedEvent[]> {
  const { rows } = await c.query<EventRow>(
    `select ${EVENT_COLUMNS}
       from events
      where payload->>'campaignId' = $1 and (transaction_id, position) > ($2::xid8, $3::bigint)
        and ($4::text[] is null or type = any($4::text[]))
      order by events.transaction_id, events.position
      limit 2000`,
    [campaignId, after.tx, after.pos, types ?? null],
  );
  return toEvents(rows);
}

/** The top-level payload keys seen per event type in the campaign's events. */
export async function payloadKeysByType(
  c: pg.ClientBase,
  campaignId: string,
): Promise<Map<string, string[]>> {
  const keys = await c.query<{ type: string; keys: string[] }>(
    `select type, array_agg(distinct k order by k) as keys
       from events, jsonb_object_keys(case jsonb_typeof(payload) when 'object' then payload else '{}'::jsonb end) k
      where payload->>'campaignId' = $1 group by type`,
    [campaignId],
  );
  return new Map(keys.rows.map((r) => [r.type, r.keys]));
}

/** How many events of each of these types the campaign has (types without any are left out). */
export async function eventCountsByType(
  db: Queryable,
  campaignId: string,
  types: readonly string[],
): Promise<Record<string, number>> {
  const { rows } = await db.query<{ type: string; n: number }>(
    `select type, count(*)::int as n from events where payload->>'campaignId' = $1
       and type = any($2::text[]) group by 1`,
    [campaignId, types],
  );
  return Object.fromEntries(rows.map((r) => [r.type, r.n]));
}

/** Per candidate of the campaign: how many CandidateValidated and TaskInjected events name it. */
export async function candidateEventCounts(
  db: Queryable,
  campaignId: string,
): Promise<{ candidate_id: string; validated: number; injected: number }[]> {
  const { rows } = await db.query<{ candidate_id: string; validated: number; injected: number }>(
    `with v as (
       select payload->>'candidateId' as candidate_id, count(*)::int as n from events
        where type = 'CandidateValidated' and payload->>'campaignId' = $1 group by 1),
     i as (
       select payload->>'candidateId' as candidate_id, count(*)::int as n from events
        where type = 'TaskInjected' and payload->>'campaignId' = $1 and payload->>'candidateId' is not null group by 1)
     select coalesce(v.candidate_id, i.candidate_id) as candidate_id, coalesce(v.n, 0) as validated,
            coalesce(i.n, 0) as injected
       from v full join i on i.candidate_id = v.candidate_id`,
    [campaignId],
  );
  return rows;
}

/** Model stages of the campaign whose every answer was refused, by stage, model and reason. */
export interface StageFailureRow {
  stage: string;
  model: string | null;
  reason: string;
  /** StageFailed events (one per stage run). */
  runs: number;
  /** What the refused answers cost, as the endpoint reported it. */
  promptTokens: number;
  completionTokens: number;
}

/** The campaign's StageFailed events grouped by stage, model and reason, the most frequent first. */
export async function stageFailures(db: Queryable, campaignId: string): Promise<StageFailureRow[]> {
  const { rows } = await db.query<StageFailureRow>(
    `select payload->>'stage' as stage, payload->>'model' as model, payload->>'reason' as reason,
            count(*)::int as runs,
            coalesce(sum((payload->>'promptTokens')::bigint), 0)::float8 as "promptTokens",
            coalesce(sum((payload->>'completionTokens')::bigint), 0)::float8 as "completionTokens"
       from events where payload->>'campaignId' = $1 and type = 'StageFailed'
      group by 1, 2, 3 order by runs desc, stage, reason`,
    [campaignId],
  );
  return rows;
}
