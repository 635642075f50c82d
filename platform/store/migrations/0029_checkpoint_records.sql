-- Up Migration
-- What the checkpoint route reads, so that a request reads what its checkpoint's chain needs and
-- not the campaign's whole checkpoints stream (platform/store/checkpoints/):
-- * checkpoint_records: one row per CheckpointSaved, written in the transaction that appends it
--   (seq: the event's version in the campaign's checkpoints stream, the order the manifests
--   depend on; report_hash: SHA-256 of the report as the route compares it, filled in by the
--   route for the rows copied here from the events);
-- * checkpoint_retrained: the steps each checkpoint's run trained again, one row per step;
-- * checkpoint_waits: checkpoints answered 503 because a step up to theirs is not closed, and
--   what they wait for (`rods campaign status` names them);
-- * step_refusals: the last refusal (422) of a step's closing batch, so that rods knows why a
--   step never closed, not only the trainer.
create table checkpoint_records (
  campaign_id     text not null,
  checkpoint_id   text not null,
  seq             bigint not null,
  run_id          text not null,
  trainer_step    bigint not null,
  resumed_from    text,
  digest          text,
  report_hash     text,
  manifest_root   text not null,
  manifest_tasks  integer not null,
  manifest_groups bigint not null,
  recorded_at     timestamptz not null,
  primary key (campaign_id, checkpoint_id),
  unique (campaign_id, seq)
);
create index checkpoint_records_run on checkpoint_records (campaign_id, run_id, seq);

create table checkpoint_retrained (
  campaign_id   text not null,
  checkpoint_id text not null,
  step          bigint not null,
  task_ids      text[] not null,
  rollouts      integer[] not null,
  primary key (campaign_id, checkpoint_id, step)
);

insert into checkpoint_records (campaign_id, checkpoint_id, seq, run_id, trainer_step, resumed_from, digest,
                                manifest_root, manifest_tasks, manifest_groups, recorded_at)
select payload->>'campaignId', payload->>'checkpointId', stream_version, payload->>'runId',
       (payload->>'trainerStep')::bigint, payload->>'resumedFrom', payload->>'digest',
       payload->>'manifestRoot', (payload->>'manifestTasks')::integer, (payload->>'manifestGroups')::bigint,
       recorded_at
  from events
 where type = 'CheckpointSaved' and stream_id = 'checkpoints-' || (payload->>'campaignId')
on conflict do nothing;

insert into checkpoint_retrained (campaign_id, checkpoint_id, step, task_ids, rollouts)
select e.payload->>'campaignId', e.payload->>'checkpointId', (r->>'step')::bigint,
       array(select jsonb_array_elements_text(r->'taskId')),
       array(select (x)::integer from jsonb_array_elements_text(r->'rollouts') x)
  from events e, jsonb_array_elements(e.payload->'retrainedSteps') r
 where e.type = 'CheckpointSaved' and e.stream_id = 'checkpoints-' || (e.payload->>'campaignId')
on conflict do nothing;

create table checkpoint_waits (
  campaign_id     text not null,
  checkpoint_id   text not null,
  trainer_step    bigint not null,
  -- the first step up to the checkpoint's that is not closed, and why, as the 503 said
  waits_for_step  bigint,
  reason          text not null,
  first_asked_at  timestamptz not null default now(),
  last_asked_at   timestamptz not null default now(),
  attempts        bigint not null default 1,
  primary key (campaign_id, checkpoint_id)
);

create table step_refusals (
  campaign_id text not null,
  step        bigint not null,
  batch_id    text,
  problem     text not null,
  detail      text not null,
  refused_at  timestamptz not null default now(),
  refusals    bigint not null default 1,
  primary key (campaign_id, step)
);

-- Down Migration
drop table step_refusals;
drop table checkpoint_waits;
drop table checkpoint_retrained;
drop table checkpoint_records;
