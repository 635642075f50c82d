-- Up Migration
-- The synthesis runs of a campaign that have no outcome yet, which every status call reports. They
-- were found by reading every SeedSelected, SynthesisStarted and outcome event the campaign ever
-- recorded: more each step. The pool projection (platform/store/pool/open-syntheses.ts) now keeps
-- one row per run from its selection to its outcome, in the transaction that appends them; the
-- table holds the runs in flight, a handful.
create table open_syntheses (
  campaign_id  text not null,
  -- The run's id; legacy_id is the form campaigns started before injective ids gave it.
  synthesis_id text not null,
  legacy_id    text not null,
  seed_task_id text not null,
  step         bigint not null,
  selected_at  timestamptz not null,
  started_at   timestamptz,
  primary key (campaign_id, synthesis_id)
);
create index open_syntheses_legacy on open_syntheses (campaign_id, legacy_id);

-- The runs of campaigns recorded before, from their events (a one-time pass).
insert into open_syntheses (campaign_id, synthesis_id, legacy_id, seed_task_id, step, selected_at)
select payload->>'campaignId',
       'synth:' || (payload->>'campaignId') || ':' || (payload->>'step') || ':' || (payload->>'seedTaskId'),
       'synth-' || (payload->>'campaignId') || '-' || (payload->>'step') || '-' || (payload->>'seedTaskId'),
       payload->>'seedTaskId', (payload->>'step')::bigint, recorded_at
  from events where type = 'SeedSelected'
on conflict do nothing;
update open_syntheses o set started_at = e.recorded_at, synthesis_id = e.payload->>'synthesisId'
  from events e
 where e.type = 'SynthesisStarted' and e.payload->>'campaignId' = o.campaign_id
   and e.payload->>'synthesisId' in (o.synthesis_id, o.legacy_id);
delete from open_syntheses o using events e
 where e.type in ('CandidateValidated', 'CandidateRejected') and e.payload->>'campaignId' = o.campaign_id
   and e.payload->>'synthesisId' in (o.synthesis_id, o.legacy_id);

-- Down Migration
drop table open_syntheses;
