// Reads of a campaign's events that planning and the analysis tools make (the event log's SQL
// stays in platform/store/events/): the synthesis funnel and latencies, each seed's latest outcomes,
// and the pages and payload keys an export reads.
import type pg from 'pg';
import { EVENT_COLUMNS, type EventRow, type Queryable, toEvents } from './event-store.js';
import type { RecordedEvent } from './recorded-event.js';

export interface FunnelRow {
  type: string;
  stage: string | null;
  key: string | null;
  n: number;
}

/**
 * The funnel's counts per event type, stage and key (the repair's prompt hash tells a repair
 * from a model's execute stage); analysis/status/funnel.ts reads them.
 */
export async function synthesisFunnelRows(
  db: Queryable,
  campaignId: string,
  repairPromptHash: string,
): Promise<FunnelRow[]> {
  const { rows } = await db.query<FunnelRow>(
    // A run is a SynthesisStarted; an Augment variant has none and counts for the run its id
    // extends (a seed task id may itself end in ~miss_param, so the suffix alone cannot tell).
    `with campaign_events as (
       select type, payload from events
        where payload->>'campaignId' = $1
          and type in ('SynthesisStarted', 'SeedSelected', 'StageCompleted', 'CandidateValidated',
                       'CandidateRejected', 'TaskInjected')
     ), runs as (
       select payload->>'synthesisId' as id from campaign_events where type = 'SynthesisStarted'
     )
     select type,
            payload->>'stage' as stage,
            case when type = 'StageCompleted' then
              case when payload->>'promptVersionHash' = $2 then 'repair'
                   when payload->>'model' is null then 'no-model' else 'model' end
                 when type = 'CandidateRejected' then payload->>'reasonCode' end as key,
            (case when type = 'StageCompleted'
                  then count(distinct case when payload->>'synthesisId' in (select id from runs)
                                           then payload->>'synthesisId'
                                           else regexp_replace(payload->>'synthesisId', '~(miss_func|miss_param)$', '') end)
                  else count(*) end)::int as n
       from campaign_events
      where type <> 'SynthesisStarted'
      group by 1, 2, 3`,
    [campaignId, repairPromptHash],
  );
  return rows;
}

export interface LatencyRow {
  synthesis_id: string;
  seed: string | null;
  step: string | null;
  type: string;
  reason: string | null;
  ms: number;
}

/** Each synthesis run's first outcome and how long after its start it came. */
export async function synthesisLatencyRows(db: Queryable, campaignId: string): Promise<LatencyRow[]> {
  const { rows } = await db.query<LatencyRow>(
    // Each run's first outcome (an Augment variant's outcomes come later under its own id).
    `with started as (
       select payload->>'synthesisId' as id, payload->>'seedTaskId' as seed, recorded_at,
              case when payload->>'selectionEventId' ~* '^[0-9a-f-]{36}$'
                   then (payload->>'selectionEventId')::uuid end as selection
         from events where payload->>'campaignId' = $1 and type = 'SynthesisStarted'
     ), outcomes as (
       select distinct on (payload->>'synthesisId') payload->>'synthesisId' as id, type,
              payload->>'reasonCode' as reason, recorded_at
         from events
        where payload->>'campaignId' = $1 and type in ('CandidateValidated', 'CandidateRejected')
        order by payload->>'synthesisId', transaction_id, position
     )
     select s.id as synthesis_id, s.seed, sel.payload->>'step' as step, o.type, o.reason,
            (extract(epoch from (o.recorded_at - s.recorded_at)) * 1000)::float8 as ms
       from started s join outcomes o on o.id = s.id
       left join events sel on sel.event_id = s.selection
      order by o.recorded_at`,
    [campaignId],
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
