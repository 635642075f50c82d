-- Up Migration
-- Each seed's run of rejected children since its latest validated one, which the planner's
-- rejection backoff reads every step (selection.rejectionBackoff). Before this table, planning
-- read every candidate outcome event of the campaign through the campaign-id index, which walks
-- the campaign's whole event heap: a planning step cost more each step, without bound. The pool
-- projection keeps one row per seed with each outcome it records (platform/store/pool/), so
-- planning reads one row per seed that has a run. `reasons` keeps the newest 64 reason codes.
create table seed_rejection_runs (
  campaign_id   text not null,
  seed_task_id  text not null,
  -- rejected children recorded since the seed's latest validated child
  run           bigint not null default 0,
  -- their reason codes, newest first (at most 64)
  reasons       text[] not null default '{}',
  -- whether any child of the seed was ever validated
  has_validated boolean not null default false,
  primary key (campaign_id, seed_task_id)
);

-- The runs of campaigns recorded before, from their outcome events (newest first per seed).
insert into seed_rejection_runs (campaign_id, seed_task_id, run, reasons, has_validated)
select campaign_id, seed,
       count(*) filter (where newer_validations = 0 and rejected) as run,
       coalesce((array_agg(coalesce(reason, 'rejected') order by transaction_id desc, position desc)
                   filter (where newer_validations = 0 and rejected))[1:64], '{}') as reasons,
       bool_or(not rejected) as has_validated
  from (
    select payload->>'campaignId' as campaign_id, payload->>'seedTaskId' as seed,
           type = 'CandidateRejected' as rejected, payload->>'reasonCode' as reason,
           transaction_id, position,
           count(*) filter (where type = 'CandidateValidated') over (
             partition by payload->>'campaignId', payload->>'seedTaskId'
             order by transaction_id desc, position desc
             rows between unbounded preceding and current row) as newer_validations
      from events
     where type in ('CandidateValidated', 'CandidateRejected')
       and payload->>'campaignId' is not null and payload->>'seedTaskId' is not null
  ) outcomes
 group by campaign_id, seed;

-- Down Migration
drop table seed_rejection_runs;
