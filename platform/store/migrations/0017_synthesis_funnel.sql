-- Up Migration
-- The synthesis funnel (analysis/status/funnel.ts: the dashboard, the demo report) and the
-- synthesis latencies read every event of the campaign through the campaign-id index, which walks
-- the campaign's whole event heap: a dashboard poll cost more each step, without bound. The pool
-- projection now keeps the funnel's counts with every event it records (platform/store/pool/funnel.ts),
-- and the latencies read the newest runs through the index below.

-- One row per synthesis run and stage, so that a run counts once per stage and kind. stage '' is
-- the run's own SynthesisStarted (an Augment variant has none and counts for its base run).
create table synthesis_funnel_marks (
  campaign_id text not null,
  run_id      text not null,
  stage       text not null,
  -- a StageCompleted without a model (the environment's execute)
  no_model    boolean not null default false,
  -- the prompt hashes of its model calls, sorted ('' for a call without one)
  hashes      text[] not null default '{}',
  primary key (campaign_id, run_id, stage)
);

-- Counts per event type, stage and key ('' for none): SeedSelected, CandidateValidated,
-- TaskInjected, CandidateRejected (key: its reason code) as events; StageCompleted as runs, key
-- 'no-model', or 'model' per set of prompt hashes the runs called at that stage (the read tells
-- the config-patch prompt's repairs from other calls). No row holds 0.
create table synthesis_funnel_counts (
  campaign_id text not null,
  type        text not null,
  stage       text not null default '',
  key         text not null default '',
  hashes      text[] not null default '{}',
  n           bigint not null,
  primary key (campaign_id, type, stage, key, hashes)
);

-- The funnel of campaigns recorded before, from their events (one pass over the log), as the
-- projection would have kept it: a run's SynthesisStarted comes first in its stream.
create temp table funnel_events as
select payload->>'campaignId' as campaign_id, type, payload->>'synthesisId' as synthesis_id,
       payload->>'stage' as stage, payload->>'model' is null as no_model,
       coalesce(payload->>'promptVersionHash', '') as hash, payload->>'reasonCode' as reason
  from events
 where type in ('SynthesisStarted', 'StageCompleted', 'SeedSelected', 'CandidateValidated',
                'CandidateRejected', 'TaskInjected')
   and payload->>'campaignId' is not null;

insert into synthesis_funnel_marks (campaign_id, run_id, stage)
select distinct campaign_id, synthesis_id, ''
  from funnel_events where type = 'SynthesisStarted' and synthesis_id is not null;

insert into synthesis_funnel_marks (campaign_id, run_id, stage, no_model, hashes)
select e.campaign_id,
       case when s.run_id is not null then e.synthesis_id
            else regexp_replace(e.synthesis_id, '~(miss_func|miss_param)$', '') end,
       e.stage, bool_or(e.no_model),
       coalesce(array_agg(distinct e.hash order by e.hash) filter (where not e.no_model), '{}')
  from funnel_events e
  left join synthesis_funnel_marks s
    on s.campaign_id = e.campaign_id and s.run_id = e.synthesis_id and s.stage = ''
 where e.type = 'StageCompleted' and e.synthesis_id is not null and e.stage is not null
 group by 1, 2, 3;

insert into synthesis_funnel_counts (campaign_id, type, stage, key, hashes, n)
select campaign_id, 'StageCompleted', stage, 'no-model', '{}', count(*)
  from synthesis_funnel_marks where stage <> '' and no_model group by campaign_id, stage
union all
select campaign_id, 'StageCompleted', stage, 'model', hashes, count(*)
  from synthesis_funnel_marks where stage <> '' and hashes <> '{}' group by campaign_id, stage, hashes
union all
select campaign_id, type, coalesce(stage, ''),
       case when type = 'CandidateRejected' then coalesce(reason, '') else '' end, '{}', count(*)
  from funnel_events
 where type in ('SeedSelected', 'CandidateValidated', 'CandidateRejected', 'TaskInjected')
 group by 1, 2, 3, 4;

drop table funnel_events;

-- The newest synthesis runs of a campaign (the dashboard's latencies), found without walking the
-- campaign's other events; each run's outcome is then read from its own stream.
create index events_synthesis_started on events ((payload ->> 'campaignId'), transaction_id, position)
  where type = 'SynthesisStarted';

-- Down Migration
drop index events_synthesis_started;
drop table synthesis_funnel_counts;
drop table synthesis_funnel_marks;
